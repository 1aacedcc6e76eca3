package pull

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"
)

// clockWaitMax bounds the wait for the clock: a board whose network
// reaches no NTP server may still have a time good enough (saved on the
// state), and a certificate error then names the clock (withClockHint).
const clockWaitMax = 5 * time.Minute

// waitClock waits until ClockSet exists (nvinit's SNTP client set the
// clock: contract.ClockSetPath), checking every second, when ClockSet
// names a file; a TLS request before would fail its certificate check on a
// board that boots at 1970. It says so when it starts waiting and when the
// clock is set; after clockWaitMax it polls anyway, and says that. It
// returns ctx's error when ctx ends first.
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
		if waited >= clockWaitMax {
			p.logf("the clock is still not set by SNTP after %v: polling anyway (it reads %s)", clockWaitMax, p.now().UTC().Format(time.RFC3339))
			return nil
		}
		if waited == 0 {
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
