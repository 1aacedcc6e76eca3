package appliance

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// clockFloor is the image's floor for the device's clock
// (contract.Clock.Floor), in Unix seconds: the newest NotBefore of the CA
// bundle at path, 0 when the image has none. nvinit sets a clock that
// reads earlier (a Pi's first boot, at 1970) forward to it. The bundle's
// over the build's time, because the bundle is already an input of the
// image's bytes, so the build stays reproducible, and a clock before its
// newest root fails every TLS chain through that root anyway.
func clockFloor(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("the clock's floor: %w", err)
	}
	var floor int64
	for len(b) > 0 {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			continue // not ours to judge: Go's TLS skips it too
		}
		floor = max(floor, c.NotBefore.Unix())
	}
	return floor, nil
}
