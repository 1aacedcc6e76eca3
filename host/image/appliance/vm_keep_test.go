package appliance

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/image/outdir"
	"github.com/nvboot/nvboot/host/vm/vmtest"
	"github.com/nvboot/nvboot/internal/testutil/buildtest"
)

// Edit, rebuild, run: the demo is booted on its own pmem files (as nvboot
// run does), kv stores 224 keys, the guest powers off; a rebuild into the
// same directory keeps the device's state, and the next boot reads every key
// back without provisioning anything.
func TestApplianceRebuildKeepsState(t *testing.T) {
	buildtest.NeedTools(t)
	k := vmtest.Kernel(t, "qemu-system-x86_64")
	dir := filepath.Join(t.TempDir(), "demo")
	buildLayout(t, config.Demo(), OFF2F, dir, k)

	b := startImage(t, dir, "")
	b.expect(t, "NVBOOT-MARK service-ready kv")
	for i := 0; i < 224; i++ {
		if code, _ := b.do(t, "PUT", fmt.Sprintf("/kv/key%03d", i), fmt.Sprintf("value %d", i)); code != http.StatusNoContent {
			t.Fatalf("PUT key%03d: %d", i, code)
		}
	}
	b.poweroff(t)

	res, err := BuildImage(context.Background(), Options{Config: config.Demo(), Layout: OFF2F, Out: dir, Kernel: k, ModuleRoot: moduleRoot(t)})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	// The text store, mounted read-only, is as built: nothing to keep.
	if !slices.Equal(res.Kept, []string{outdir.StatePmemFile}) {
		t.Errorf("Kept %v, want the state", res.Kept)
	}

	b = startImage(t, dir, "")
	b.expect(t, "NVBOOT-MARK service-ready kv")
	for i := 0; i < 224; i++ {
		if code, v := b.do(t, "GET", fmt.Sprintf("/kv/key%03d", i), ""); code != 200 || v != fmt.Sprintf("value %d", i) {
			t.Fatalf("after the rebuild, key%03d: %d %q\nconsole:\n%s", i, code, v, b.m.Console())
		}
	}
	if strings.Contains(b.m.Console(), "provision") {
		t.Errorf("the boot after the rebuild provisioned:\n%s", b.m.Console())
	}
	b.poweroff(t)
}
