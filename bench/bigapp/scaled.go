package main

import (
	"context"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/format/benchjson"
	"github.com/nvboot/nvboot/format/bootmark"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/vm"
)

// The time-scaled device (-scale N): the device clock's disk throttle runs
// on the host's clock while a busy guest's time runs by its instructions,
// so on a host that emulates slower than the device clock's rate, reads
// that overlap the guest's work take less guest time than the storage model
// says. Slowing the counted core N times (-icount shift=log2 N) to a rate
// the host can keep up with, with align=on so that QEMU holds guest time to
// the host's, and the storage model N times slower too, puts the disk and
// the core on one clock; the times divided by N are those of the 1-GIPS
// device with the model's disk. Not quite: what the guest does per unit of
// time (timer ticks, the Go runtime's sysmon) is N times as much per
// instruction of real work, and where the host still falls behind (QEMU
// says "the guest is now late"), overlapped reads again look cheaper.

const lateWarning = "The guest is now late by"

var lateRE = regexp.MustCompile(`late by ([0-9.]+) to ([0-9.]+) seconds`)

// scaledBoot is one boot of the time-scaled device, its times divided by
// the scale.
type scaledBoot struct {
	PowerOn, Init time.Duration
	Late          float64 // the most QEMU said the guest was late, in host seconds
}

// scaleShift checks a -scale: a power of two QEMU's counter can take.
func scaleShift(n int) (int, error) {
	if n < 2 || n&(n-1) != 0 {
		return 0, fmt.Errorf("-scale %d: want a power of two, 2 to 512", n)
	}
	shift := bits.TrailingZeros(uint(n))
	if _, err := vm.ICountShift(vm.DefaultCPURate >> shift); err != nil {
		return 0, fmt.Errorf("-scale %d: %w", n, err)
	}
	return shift, nil
}

// scaled is a storage model n times slower.
func scaled(s vm.Storage, n int64) vm.Storage {
	s.ReadBPS, s.ReadIOPS, s.WriteBPS, s.WriteIOPS = s.ReadBPS/n, s.ReadIOPS/n, s.WriteBPS/n, s.WriteIOPS/n
	s.About += fmt.Sprintf(", %d times slower", n)
	return s
}

// runScaled boots each layout's image of a measured size (dir/<layout>,
// with its first-boot pmem in dir/prepared/<layout>) o.Runs times,
// interleaved as measure does, on the time-scaled device.
func runScaled(ctx context.Context, o *options, dir string, lw *lineWriter) (map[string][]scaledBoot, error) {
	shift, err := scaleShift(o.Scale)
	if err != nil {
		return nil, err
	}
	prof, err := vm.Profile(o.Storage)
	if err != nil {
		return nil, err
	}
	n := int64(o.Scale)
	out := map[string][]scaledBoot{}
	for r := 1; r <= o.Runs; r++ {
		for i := range o.Layouts {
			l := o.Layouts[(i+r-1)%len(o.Layouts)]
			b, err := scaledOnce(ctx, filepath.Join(dir, l), filepath.Join(dir, "prepared", l), filepath.Join(dir, "scaled-run"), shift, scaled(prof, n))
			if err != nil {
				return nil, fmt.Errorf("%s, scaled boot %d: %w", l, r, err)
			}
			fmt.Fprintf(lw, "scaled %d: %s boot %d/%d: answered %.0f ms after power-on, %.0f ms after the handover (divided by %d; the guest was late by up to %.0f s)\n",
				n, l, r, o.Runs, ms(b.PowerOn), ms(b.Init), n, b.Late)
			out[l] = append(out[l], b)
		}
	}
	return out, nil
}

// scaledOnce boots the image in dir on a fresh copy of the pmem in pmem
// until nvinit sees the first answer, and reads the times from the guest's
// clock (bootmark.PlaceGuest); the firmware's read of the kernel is modeled
// from the storage's bandwidth, as measure does.
func scaledOnce(ctx context.Context, dir, pmem, run string, shift int, s vm.Storage) (scaledBoot, error) {
	im, err := appliance.ReadImage(dir)
	if err != nil {
		return scaledBoot{}, err
	}
	port := 0
	for _, sv := range im.Services {
		if sv.ForwardPort != 0 && !sv.DontStart {
			port = sv.ForwardPort
			break
		}
	}
	if port == 0 {
		return scaledBoot{}, fmt.Errorf("image %s: no service has a ForwardPort", dir)
	}
	if err := os.MkdirAll(run, 0o755); err != nil {
		return scaledBoot{}, err
	}
	defer os.RemoveAll(run)
	if err := appliance.CopyPmem(pmem, im, run); err != nil {
		return scaledBoot{}, err
	}
	// nvinit times the answer inside the guest; the forwarded port gives
	// the boot the network card measure's boots have.
	host, err := vm.FreePort()
	if err != nil {
		return scaledBoot{}, err
	}
	cfg, err := appliance.VMConfig(dir, im, appliance.BootOptions{Storage: s, Accel: "tcg", PmemDir: run,
		Forwards: []vm.Forward{{Host: host, Guest: port}}, ExtraCmdline: fmt.Sprintf("%s=%d", contract.AnswerParam, port)})
	if err != nil {
		return scaledBoot{}, err
	}
	cfg.Extra = append(cfg.Extra, "-icount", fmt.Sprintf("shift=%d,sleep=on,align=on", shift))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	m, err := vm.Start(ctx, cfg)
	if err != nil {
		return scaledBoot{}, err
	}
	defer m.Kill()
	want := bootmark.Prefix + bootmark.Answered + " " + strconv.Itoa(port) + " "
	if _, err := m.ExpectString(ctx, want); err != nil {
		return scaledBoot{}, fmt.Errorf("no %q line: %w; console:\n%s", want, err, m.ConsoleTail(25))
	}
	m.Kill()
	var b scaledBoot
	marks := bootmark.Unstamped(m.Marks())
	for _, l := range m.Lines() {
		if strings.Contains(l.Text, lateWarning) {
			if g := lateRE.FindStringSubmatch(l.Text); g != nil {
				if v, err := strconv.ParseFloat(g[2], 64); err == nil {
					b.Late = max(b.Late, v)
				}
			}
		}
	}
	tl, err := bootmark.PlaceGuest(marks)
	if err != nil {
		return scaledBoot{}, err
	}
	answered, ok1 := tl.Stages[bootmark.Answered+":"+strconv.Itoa(port)]
	handover, ok2 := tl.Stages[bootmark.Handover]
	if !ok1 || !ok2 {
		return scaledBoot{}, fmt.Errorf("no %s or %s mark; console:\n%s", bootmark.Answered, bootmark.Handover, m.ConsoleTail(25))
	}
	st, err := os.Stat(filepath.Join(dir, im.Kernel))
	if err != nil {
		return scaledBoot{}, err
	}
	var load time.Duration
	if s.ReadBPS > 0 {
		load = time.Duration(float64(st.Size()) / float64(s.ReadBPS) * float64(time.Second))
	}
	k := time.Duration(1) << shift
	b.PowerOn, b.Init = (load+answered)/k, (answered-handover)/k
	return b, nil
}

// scaledResults are "<size>.scaled.<layout>.power_on_to_service",
// ".init_to_service" (ms, divided by the scale) and ".late_max" (host s),
// and the ratios "<size>.scaled.<span>.off2f_vs_<layout>".
func scaledResults(name string, layouts []string, by map[string][]scaledBoot) ([]benchjson.Result, map[string]float64) {
	var res []benchjson.Result
	med := map[string]float64{}
	for _, l := range layouts {
		boots := by[l]
		if len(boots) == 0 {
			continue
		}
		var on, init, late []float64
		for _, b := range boots {
			on, init, late = append(on, ms(b.PowerOn)), append(init, ms(b.Init)), append(late, b.Late)
		}
		p := name + ".scaled." + l + "."
		for _, f := range []struct {
			span string
			v    []float64
		}{{spanPowerOn, on}, {spanInit, init}} {
			r := benchjson.Stats(p+f.span, "ms", f.v)
			r.Median, r.Min, r.Max = round(r.Median, 1), round(r.Min, 1), round(r.Max, 1)
			res = append(res, r)
			med[l+"."+f.span] = r.Median
		}
		res = append(res, benchjson.Stats(p+"late_max", "s", late))
	}
	ratios := map[string]float64{}
	for _, l := range layouts[1:] {
		for _, sp := range spans {
			a, ok1 := med["off2f."+sp]
			b, ok2 := med[l+"."+sp]
			if ok1 && ok2 && b > 0 {
				ratios[fmt.Sprintf("%s.scaled.%s.off2f_vs_%s", name, sp, strings.ReplaceAll(l, "-", ""))] = round(a/b, 3)
			}
		}
	}
	return res, ratios
}
