package benchjson

import (
	"os"
	"path/filepath"
	"strings"
)

// AddSystem records in env what the system a measurer runs on says about
// itself and moves its figures: the kernel release, the clock source and
// transparent huge pages. A file that cannot be read is left out.
func AddSystem(env map[string]string) {
	for k, f := range map[string]string{
		"kernel":      "/proc/sys/kernel/osrelease",
		"clocksource": "/sys/devices/system/clocksource/clocksource0/current_clocksource",
		"thp":         "/sys/kernel/mm/transparent_hugepage/enabled",
	} {
		if b, err := os.ReadFile(f); err == nil {
			env[k] = strings.TrimSpace(string(b))
		}
	}
}

// MountOf returns the /proc/mounts line of the filesystem dir is on (the
// longest mount point that holds it), so a figure says whether it was
// taken on DAX, tmpfs or a disk.
func MountOf(dir string) string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "unknown: " + err.Error()
	}
	return mountIn(string(b), dir)
}

func mountIn(mounts, dir string) string {
	abs, _ := filepath.Abs(dir)
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	best, line := "", "unknown: not in /proc/mounts"
	for _, l := range strings.Split(mounts, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		mp := f[1]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, line = mp, l
		}
	}
	return line
}
