package nvinit

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/kernelpmem"
)

func TestWriteKernelRegion(t *testing.T) {
	dir := t.TempDir()
	kernel := bytes.Repeat([]byte("vmlinux "), 5000)
	image, dev := filepath.Join(dir, "vmlinux"), filepath.Join(dir, "pmem2")
	if err := os.WriteFile(image, kernel, 0o444); err != nil {
		t.Fatal(err)
	}
	const size = 1 << 20
	if err := os.WriteFile(dev, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	kr := &contract.KernelRegion{Device: dev, Image: image, SHA256: fmt.Sprintf("%x", sha256.Sum256(kernel))}
	region := func() ([]byte, error) {
		f, err := os.Open(dev)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return kernelpmem.Read(f, size)
	}

	for _, cmdline := range []string{"quiet", "nvboot.kernel=pmem"} {
		if wrote, err := writeKernelRegion(kr, cmdline); wrote || err != nil {
			t.Errorf("%q: wrote %v, %v; want nothing written", cmdline, wrote, err)
		}
	}
	if _, err := region(); err == nil {
		t.Fatal("region written without a card boot")
	}
	if _, err := writeKernelRegion(kr, "nvboot.kernel=floppy"); err == nil || !strings.Contains(err.Error(), "floppy") {
		t.Errorf("an unknown source: %v", err)
	}
	bad := *kr
	bad.SHA256 = strings.Repeat("0", 64)
	if wrote, err := writeKernelRegion(&bad, "nvboot.kernel=card"); wrote || err == nil || !strings.Contains(err.Error(), "not written") {
		t.Errorf("a root copy that does not match the config: wrote %v, %v", wrote, err)
	}
	if _, err := region(); err == nil {
		t.Fatal("region written from a kernel whose hash is wrong")
	}
	if wrote, err := writeKernelRegion(kr, "console=ttyS0 nvboot.kernel=card"); !wrote || err != nil {
		t.Fatalf("card boot: wrote %v, %v", wrote, err)
	}
	if got, err := region(); err != nil || !bytes.Equal(got, kernel) {
		t.Fatalf("region after the write: %v (equal %v)", err, bytes.Equal(got, kernel))
	}
}
