package pull

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"
)

// clockLogEvery is how often a wait for the clock says it still waits.
const clockLogEvery = 10 * time.Minute

// waitClock waits until ClockSet exists (nvinit's SNTP client set the
// clock: contract.ClockSetPath), checking every second, when ClockSet
// names a file; a TLS request before would fail its certificate check on a
// board that boots at 1970. It says so when it starts waiting, every 10
// minutes after, and when the clock is set. It returns ctx's error when
// ctx ends first.
func (p *Puller) waitClock(ctx context.Context) error {
	if p.ClockSet == "" {
		return nil
	}
	var waited time.Duration
	for {
		if _, err := os.Stat(p.ClockSet); err == nil {
			if waited > 0 {
				p.logf("the clock is set (%s): polling", p.ClockSet)
			}
			return nil
		}
		if waited%clockLogEvery == 0 {
			p.logf("waiting for the clock to be set by SNTP (%s) before the first request: it reads %s, and a TLS certificate check needs the right time",
				p.ClockSet, p.now().UTC().Format(time.RFC3339))
		}
		if err := p.sleep(ctx, time.Second); err != nil {
			return err
		}
		waited += time.Second
	}
}

// withClockHint adds what the clock reads to an error whose cause is a
// certificate outside its validity period: on a board without a real-time
// clock that is almost always the clock, not the certificate.
func (p *Puller) withClockHint(err error) error {
	var inv x509.CertificateInvalidError
	if !errors.As(err, &inv) || inv.Reason != x509.Expired {
		return err
	}
	return fmt.Errorf("%w; this appliance's clock reads %s: is it set? (the image config's NTP sets it at boot)", err, p.now().UTC().Format(time.RFC3339))
}
