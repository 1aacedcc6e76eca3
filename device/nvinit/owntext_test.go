package nvinit

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
)

// When the loader ran nvinit from the fallback copy (OFF2F_FALLBACK),
// nvinit says so and checks the store's copy of its own text through the
// services' repair: damaged, it is rewritten from the clean copy; the
// console and the update endpoint's features (ownText) say what was found
// and done. Without the variable nothing is read.
func TestRepairOwnText(t *testing.T) {
	const why = "/nv/text/HASH: damaged: CRC-32C of its segments is 0x1, the note's 0x2"
	cases := []struct {
		name     string
		why      string
		setup    func(t *testing.T, f *textFixture)
		noStore  bool
		want     []string // console lines, in order
		wantText string   // in ownText
		clean    bool     // the store's text is the clean copy afterwards
	}{
		{name: "the store's copy ran", setup: func(*testing.T, *textFixture) {}, clean: true},
		{name: "damaged", why: why, setup: func(t *testing.T, f *textFixture) { f.damage(t, f.storeText()) },
			want:     []string{"nvinit: own text: the loader ran the fallback copy: " + why, "nvinit: own text: STORE was damaged (", "); repaired from FALLBACK: the next boot runs it from the store"},
			wantText: "ran the fallback copy (" + why + "); repaired from FALLBACK", clean: true},
		{name: "sound now", why: why, setup: func(*testing.T, *textFixture) {},
			want: []string{"nvinit: own text: STORE is sound now"}, wantText: "the store's copy is sound now", clean: true},
		{name: "clean copy damaged too", why: why, setup: func(t *testing.T, f *textFixture) {
			f.damage(t, f.storeText())
			f.damage(t, f.fallbackText())
		}, want: []string{"nvinit: own text: STORE is damaged (", "); not repaired: its clean copy FALLBACK is damaged too"},
			wantText: "not repaired: its clean copy FALLBACK is damaged too"},
		{name: "no store", why: why, noStore: true, setup: func(*testing.T, *textFixture) {},
			want: []string{"nvinit: own text: not repaired: no text store is mounted"}, wantText: "not repaired: no text store is mounted", clean: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newTextFixture(t)
			c.setup(t, f)
			var out bytes.Buffer
			b := &boot{Console: &console{W: &out}, OwnTextFallback: c.why, InitPath: f.header, cfg: &contract.InitConfig{}}
			if !c.noStore {
				b.texts = f.repairer(&fakeMounter{})
			}
			b.repairOwnText()
			con := strings.NewReplacer(f.storeText(), "STORE", f.fallbackText(), "FALLBACK").Replace(out.String())
			text := strings.NewReplacer(f.storeText(), "STORE", f.fallbackText(), "FALLBACK").Replace(b.ownText)
			at := 0
			for _, w := range c.want {
				i := strings.Index(con[at:], w)
				if i < 0 {
					t.Fatalf("console lacks %q (after byte %d):\n%s", w, at, con)
				}
				at += i + len(w)
			}
			if c.why == "" && (con != "" || b.ownText != "") {
				t.Fatalf("no fallback, yet: console %q, ownText %q", con, b.ownText)
			}
			if !strings.Contains(text, c.wantText) {
				t.Errorf("ownText %q, want it to contain %q", text, c.wantText)
			}
			got, err := os.ReadFile(f.storeText())
			if err != nil {
				t.Fatal(err)
			}
			if c.clean != bytes.Equal(got, f.text) {
				t.Errorf("the store's text is the clean copy: %v, want %v", !c.clean, c.clean)
			}
		})
	}
}
