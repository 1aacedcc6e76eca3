package appliance

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nvboot/nvboot/vm"
)

func TestZZBoot(t *testing.T) {
	dir := os.Getenv("IMG")
	im, err := ReadImage(dir)
	if err != nil {
		t.Fatal(err)
	}
	sd, _ := vm.Profile("sd")
	cfg, err := VMConfig(dir, im, BootOptions{Storage: sd, CPURate: 1e9, ExtraCmdline: os.Getenv("XCMD")})
	if err != nil {
		t.Fatal(err)
	}
	if b := os.Getenv("BIOS"); b != "" {
		cfg.Extra = append(cfg.Extra, "-bios", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if e, err := vm.KernelEntry(ctx, cfg); err == nil {
		t.Logf("ENTRY %v", e)
	} else {
		t.Logf("entry: %v", err)
	}
	m, err := vm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	m.ExpectString(ctx, "NVBOOT-MARK service-ready")
	time.Sleep(300 * time.Millisecond)
	m.Kill()
	for _, l := range strings.Split(m.Console(), "\n") {
		t.Log(l)
	}
}
