package nvinit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fakeMounter records calls and fails the targets it is told to.
type fakeMounter struct {
	calls []string
	fail  map[string]error // by target
}

func (f *fakeMounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	f.calls = append(f.calls, fmt.Sprintf("mount %s %s %s %#x %s", source, target, fstype, flags, data))
	return f.fail[target]
}

func (f *fakeMounter) Unmount(target string, flags int) error {
	f.calls = append(f.calls, fmt.Sprintf("umount %s %d", target, flags))
	return f.fail["umount "+target]
}

func TestMountAll(t *testing.T) {
	root := t.TempDir()
	var points []mountPoint
	for _, p := range kernelMounts {
		p.Target = filepath.Join(root, p.Target)
		points = append(points, p)
	}
	fm := &fakeMounter{fail: map[string]error{
		points[0].Target: syscall.EBUSY,  // already mounted: fine
		points[4].Target: syscall.ENODEV, // a real failure
	}}
	err := mountAll(fm, points)
	if err == nil || !strings.Contains(err.Error(), "/tmp") || strings.Contains(err.Error(), "/proc") {
		t.Fatalf("MountAll error %v: want only /tmp's", err)
	}
	if len(fm.calls) != len(points) {
		t.Fatalf("calls %q: want every point tried", fm.calls)
	}
	for i, p := range points {
		if !strings.HasPrefix(fm.calls[i], "mount "+p.Source+" "+p.Target+" ") {
			t.Errorf("call %d = %q, want %s in order", i, fm.calls[i], p.Target)
		}
		if st, err := os.Stat(p.Target); err != nil || !st.IsDir() {
			t.Errorf("%s not created", p.Target)
		}
	}
}

func TestIsMountPoint(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(mi, []byte(`22 1 254:2 / / ro,relatime shared:1 - erofs /dev/root ro
30 22 259:0 / /nv/text ro,relatime shared:9 - ext4 /dev/pmem0 ro,dax=always
31 22 0:5 / /with\040space rw - tmpfs tmpfs rw
`), 0o644)
	for dir, want := range map[string]bool{"/": true, "/nv/text": true, "/nv/state": false, "/with space": true, "/nv": false} {
		if got := isMountPoint(mi, dir); got != want {
			t.Errorf("isMountPoint(%q) = %v, want %v", dir, got, want)
		}
	}
	if isMountPoint(mi+".missing", "/") {
		t.Error("missing mountinfo reports a mount")
	}
}
