package benchjson

import "testing"

func TestMountIn(t *testing.T) {
	const mounts = "/dev/root / ext4 rw 0 0\n" +
		"/dev/pmem1 /nv/state ext4 rw,dax=always 0 0\n" +
		"tmpfs /nv/statefoo tmpfs rw 0 0\n"
	for dir, want := range map[string]string{
		"/nv/state/heap":   "/dev/pmem1 /nv/state ext4 rw,dax=always 0 0",
		"/nv/state":        "/dev/pmem1 /nv/state ext4 rw,dax=always 0 0",
		"/nv/statefoo/x":   "tmpfs /nv/statefoo tmpfs rw 0 0",
		"/nv/stat":         "/dev/root / ext4 rw 0 0",
		"/usr/lib/whatnot": "/dev/root / ext4 rw 0 0",
	} {
		if got := mountIn(mounts, dir); got != want {
			t.Errorf("mountIn(%q) = %q, want %q", dir, got, want)
		}
	}
	if got := mountIn("", "/x"); got != "unknown: not in /proc/mounts" {
		t.Errorf("no mounts: %q", got)
	}
}
