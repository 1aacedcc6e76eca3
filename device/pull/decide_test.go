package pull

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nvboot/nvboot/device/contract"
)

func layer(s string) ocispec.Descriptor {
	return ocispec.Descriptor{Digest: digest.FromString(s), Size: int64(len(s))}
}

// TestDecide: how each kind of image is installed, or why it is not.
func TestDecide(t *testing.T) {
	kv1, kv2, web1 := layer("kv 1"), layer("kv 2"), layer("web 1")
	image := func(version, base string, kv ocispec.Descriptor) *Image {
		root := layer("root")
		return &Image{Digest: "sha256:" + strings.Repeat("ab", 32), Version: version, Arch: "amd64", Base: base, ImageID: "id2", Root: &root,
			Boot: map[string]ocispec.Descriptor{"a": layer("boot a"), "b": layer("boot b")},
			Programs: []Program{{Name: "nvinit", Role: contract.RoleInit, Header: layer("nvinit")},
				{Name: "kv", Role: contract.RoleService, Header: kv}, {Name: "web", Role: contract.RoleService, Header: web1}}}
	}
	device := func(slots bool, kv string) Device {
		return Device{Arch: "amd64", Base: "b1", Version: "1.0", Slots: slots, TextStore: true,
			Services: map[string]Service{"kv": {Deployable: true, Header: kv}, "web": {Deployable: true, Header: web1.Digest.String()}}}
	}
	for _, tc := range []struct {
		name    string
		im      *Image
		dev     Device
		allow   bool
		path    string
		deploy  string // the services deployed, joined
		refused string
	}{
		{"runs it", image("1.0", "b1", kv1), device(false, kv1.Digest.String()), false, "", "", ""},
		{"kv changed", image("1.1", "b1", kv2), device(false, kv1.Digest.String()), false, contract.PullDeploy, "kv", ""},
		{"kv unknown", image("1.1", "b1", kv1), device(false, ""), false, contract.PullDeploy, "kv", ""},
		{"same version, kv changed", image("1.0", "b1", kv2), device(false, kv1.Digest.String()), false, contract.PullDeploy, "kv", ""},
		{"downgrade", image("0.9", "b1", kv2), device(false, kv1.Digest.String()), false, "", "", "lower than the running 1.0"},
		{"downgrade allowed", image("0.9", "b1", kv2), device(false, kv1.Digest.String()), true, contract.PullDeploy, "kv", ""},
		{"no version", image("", "b1", kv2), device(false, kv1.Digest.String()), false, "", "", "has no version"},
		{"another base, slots", image("2.0", "b2", kv1), device(true, kv1.Digest.String()), false, contract.PullUpdate, "", ""},
		{"another base, no slots", image("2.0", "b2", kv1), device(false, kv1.Digest.String()), false, "", "", "has no slots"},
		{"another machine", func() *Image { im := image("2.0", "b1", kv2); im.Arch = "arm64"; return im }(), device(true, ""), false, "", "", "built for arm64"},
		{"pooled kv changed, slots", image("1.1", "b1", kv2), func() Device {
			d := device(true, kv1.Digest.String())
			d.Services["kv"] = Service{Header: kv1.Digest.String()}
			return d
		}(), false, contract.PullUpdate, "", ""},
		{"a service this appliance lacks", image("1.1", "b1", kv2), func() Device {
			d := device(true, kv1.Digest.String())
			delete(d.Services, "kv")
			return d
		}(), false, "", "", "a service kv this appliance does not have"},
		{"no text store, slots", image("1.1", "b1", kv2), func() Device { d := device(true, ""); d.TextStore = false; return d }(), false, contract.PullUpdate, "", ""},
		{"elf: kv changed", elfImage(image("1.1", "b1", kv2)), elfDevice(device(false, kv1.Digest.String())), false, contract.PullDeploy, "kv", ""},
		{"elf: an OFF2F image", image("1.1", "b1", kv2), elfDevice(device(false, kv1.Digest.String())), false, "", "", "deploys whole static programs into its state"},
		{"off2f: an elf image", elfImage(image("1.1", "b1", kv2)), device(false, kv1.Digest.String()), false, "", "", "deploys OFF2F programs into its text store"},
		{"neither store, no slots", image("1.1", "b1", kv2), func() Device { d := device(false, ""); d.TextStore = false; return d }(), false, "", "", "nor, without one, a state"},
		{"A/B without a root", func() *Image { im := image("2.0", "b2", kv1); im.Root = nil; return im }(), device(true, ""), false, "", "", "no root filesystem"},
	} {
		d, err := Decide(tc.im, tc.dev, tc.allow)
		var ref *RefusedError
		switch {
		case tc.refused != "":
			if !errors.As(err, &ref) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s: %+v, %v; want refused: %q", tc.name, d, err, tc.refused)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		default:
			var names []string
			for _, p := range d.Deploy {
				names = append(names, p.Name)
			}
			if d.Path != tc.path || strings.Join(names, ",") != tc.deploy {
				t.Errorf("%s: path %q deploying %v; want %q deploying %q", tc.name, d.Path, names, tc.path, tc.deploy)
			}
		}
	}
}

// TestWait: polls are spread by a fifth of the interval; after failures
// the wait doubles up to its cap, each a point of its upper half, never
// below the interval's half nor above the cap.
func TestWait(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const poll = 10 * time.Second
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		w := Wait(poll, 0, r)
		lo, hi = min(lo, w), max(hi, w)
	}
	if lo < 8*time.Second || hi > 12*time.Second || hi-lo < 3*time.Second {
		t.Errorf("polls wait %v to %v; want spread over 8s to 12s", lo, hi)
	}
	for failures, want := range map[int]time.Duration{1: poll, 2: 2 * poll, 3: 4 * poll, 7: 64 * poll, 8: 64 * poll, 100: 64 * poll} {
		for range 200 {
			if w := Wait(poll, failures, r); w < want/2 || w > want {
				t.Fatalf("after %d failures a wait of %v; want %v to %v", failures, w, want/2, want)
			}
		}
	}
	// A long interval: the cap is an hour, or the interval when longer.
	if w := Wait(30*time.Minute, 10, r); w > time.Hour || w < 30*time.Minute {
		t.Errorf("30 min interval, 10 failures: %v; want 30 min to 1 h", w)
	}
	if w := Wait(3*time.Hour, 10, r); w > 3*time.Hour || w < 90*time.Minute {
		t.Errorf("3 h interval, 10 failures: %v; want 1.5 h to 3 h", w)
	}
}

// elfImage makes im's programs whole (an elf image's).
func elfImage(im *Image) *Image {
	for i := range im.Programs {
		im.Programs[i].ELF = true
	}
	return im
}

// elfDevice makes d an appliance without a text store, with a state.
func elfDevice(d Device) Device {
	d.TextStore, d.ELFStore = false, true
	return d
}
