package off2f_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nvboot/nvboot/off2f"
)

// TestGenCorpus refreshes the seed corpus from real programs when run with
// OFF2F_GEN_CORPUS=1 (go test ./off2f -run GenCorpus); otherwise it is a no-op.
func TestGenCorpus(t *testing.T) {
	if os.Getenv("OFF2F_GEN_CORPUS") == "" {
		t.Skip("set OFF2F_GEN_CORPUS=1 to regenerate testdata/fuzz seeds")
	}
	p := testProgs(t)
	write := func(target, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		os.MkdirAll(dir, 0o755)
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"c-static", "c-static-pie", "go-probe"} {
		conv, err := off2f.Convert(mustRead(t, p.bins[name]), off2f.Options{FallbackDir: "/fb", Device: "/dev/pmem0", FSType: "ext4", MountOpts: "dax=always"})
		if err != nil {
			t.Fatal(err)
		}
		write("FuzzParseHeader", name, conv.Header[:min(len(conv.Header), 8192)])
		write("FuzzParseText", name, conv.Text[:off2f.TextHeaderSize+4096])
	}
	// A small static executable, for the converter.
	write("FuzzConvert", "tiny", mustRead(t, p.bins["tiny"]))
}
