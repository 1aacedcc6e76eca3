package update

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/off2f"
)

func TestProgramsRecover(t *testing.T) {
	dir := t.TempDir()
	m := &lockedMounter{}
	p := &Programs{Store: contract.TextStore{Device: "pmem0", Dir: dir}, Mounter: m}
	if back, err := p.recoverTrials(); err != nil || back != nil || m.log() != "" {
		t.Fatalf("Recover with no services dir: %v %v, mounts %q: want nothing done", back, err, m.log())
	}
	// A power cut after the switch: the new link and the trial link.
	if err := p.switchTo("kv", "/nv/text/programs/new", "/bin/kv"); err != nil {
		t.Fatal(err)
	}
	if got := p.Current("kv", "/bin/kv"); got != "/nv/text/programs/new" {
		t.Fatalf("Current after Switch = %q", got)
	}
	if _, err := p.gc(); err == nil || !strings.Contains(err.Error(), "on trial") {
		t.Errorf("gc during a trial: %v, want refused", err)
	}
	back, err := p.recoverTrials()
	if err != nil || len(back) != 1 || back[0] != "kv" {
		t.Fatalf("Recover = %v, %v; want kv switched back", back, err)
	}
	if got := p.Current("kv", "/bin/kv"); got != "/bin/kv" {
		t.Errorf("Current after Recover = %q, want the old program", got)
	}
	if _, err := os.Lstat(p.Link("kv") + contract.TrialSuffix); !os.IsNotExist(err) {
		t.Errorf("the trial link is still there: %v", err)
	}
	// A kept program is not undone.
	p.switchTo("kv", "/nv/text/programs/new", "/bin/kv")
	p.keep("kv")
	if back, err := p.recoverTrials(); err != nil || back != nil {
		t.Errorf("Recover after Keep = %v, %v; want nothing", back, err)
	}
	if got := p.Current("kv", "/bin/kv"); got != "/nv/text/programs/new" {
		t.Errorf("Current after Keep and Recover = %q", got)
	}
}

// An upload cut by a power cut leaves its text in uploads/, under no
// text's name: the next boot removes it before any service starts (and
// writes nothing when there is none), and so does a gc.
func TestInterruptedUploadRemoved(t *testing.T) {
	dir := t.TempDir()
	m := &lockedMounter{}
	p := &Programs{Store: contract.TextStore{Device: "pmem0", Dir: dir}, Mounter: m}
	p.UseDeployed(nil, t.Logf)
	if m.log() != "" {
		t.Fatalf("a boot with nothing to undo remounted the store: %s", m.log())
	}
	leave := func() {
		os.MkdirAll(p.uploadsDir(), 0o755)
		os.WriteFile(filepath.Join(p.uploadsDir(), "text"), []byte("half a text"), 0o600)
	}
	leave()
	p.UseDeployed(nil, t.Logf)
	if _, err := os.Stat(p.uploadsDir()); !os.IsNotExist(err) {
		t.Errorf("after the boot, uploads/ is still there: %v", err)
	}
	if windows(t, m.log()) != 1 {
		t.Errorf("remounts: %s, want one read-write window", m.log())
	}
	leave()
	if err := off2f.WriteManifest(filepath.Join(dir, off2f.ManifestName), []string{strings.Repeat("a", 64)}); err != nil {
		t.Fatal(err)
	}
	res, err := p.gc()
	if err != nil || len(res.Removed) != 1 || res.Removed[0] != filepath.Join(p.uploadsDir(), "text") {
		t.Errorf("gc = %+v, %v; want the staged text removed", res, err)
	}
	if _, err := os.Stat(p.uploadsDir()); !os.IsNotExist(err) {
		t.Errorf("after the gc, uploads/ is still there: %v", err)
	}
}

// gc reports what the store got back, not the removed files' lengths: on
// the store's filesystem (ext4, 2 MiB clusters) each removed file frees a
// whole cluster however short it is. A text and three header files of a
// few bytes each free 8 MiB.
func TestGCCountsWhatTheStoreFrees(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a loop mount)")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	img, dir := filepath.Join(t.TempDir(), "store.img"), t.TempDir()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-O", "bigalloc", "-C", "2097152", img, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })

	p := &Programs{Store: contract.TextStore{Device: "pmem0", Dir: dir}, Mounter: &lockedMounter{}}
	text := append(off2f.TextMagic[:], "text"...)
	keep, drop := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, h := range []string{keep, drop} {
		if _, err := (off2f.Store{Dir: dir}).Put(h, text); err != nil {
			t.Fatal(err)
		}
	}
	if err := off2f.WriteManifest(filepath.Join(dir, off2f.ManifestName), []string{keep}); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(p.programsDir(), 0o755)
	for i := range 3 {
		os.WriteFile(filepath.Join(p.programsDir(), fmt.Sprint(i)), []byte("header"), 0o555)
	}
	free := func() int64 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bfree) * st.Bsize
	}
	before := free()
	res, err := p.gc()
	if err != nil {
		t.Fatal(err)
	}
	freed := free() - before
	if len(res.Removed) != 4 || res.Bytes != freed || freed < 4*2<<20 {
		t.Errorf("gc removed %d files and says %d bytes were freed; the store's free space grew by %d (want 4 files, a 2 MiB cluster at least each)",
			len(res.Removed), res.Bytes, freed)
	}
}
