package vendortree

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// Dir is the directory of the vendored tarballs: $NVBOOT_VENDOR, else
// shared/vendor beside the checkout that holds this package.
func Dir() string {
	if d := os.Getenv("NVBOOT_VENDOR"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "shared", "vendor")
}

// CacheRoot is where trees are unpacked: $NVBOOT_CACHE/vendor, else
// ~/.cache/nvboot/vendor (or $XDG_CACHE_HOME/nvboot/vendor), as for the
// kernel build.
func CacheRoot() (string, error) {
	if c := os.Getenv("NVBOOT_CACHE"); c != "" {
		return filepath.Join(c, "vendor"), nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "nvboot", "vendor"), nil
}

// Tree is the unpacked tree of the tarball name (e.g.
// "buildroot-2026.02.3"), under the cache root; the test is skipped, with
// the reason, when the tarball or tar is missing, and fails when the
// tarball does not match SHA256SUMS.
func Tree(t testing.TB, name string) string {
	t.Helper()
	root, err := CacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Unpack(Dir(), name, root)
	if err != nil {
		if os.IsNotExist(err) {
			t.Skipf("vendored tree %s: %v (the release tarballs are kept in ../shared/vendor, or set NVBOOT_VENDOR)", name, err)
		}
		t.Fatal(err)
	}
	return dir
}

// Unpack unpacks vendorDir/name.tar.xz, checked against
// vendorDir/SHA256SUMS, into cacheRoot/name-HASH/ (HASH: the first 16 hex
// digits of the tarball's sha256) unless it is there already, and returns
// the tree's directory (the tarball's single top directory). Concurrent
// callers wait on a lock; a cut-short unpack is never used.
func Unpack(vendorDir, name, cacheRoot string) (string, error) {
	tarball := filepath.Join(vendorDir, name+".tar.xz")
	want, err := listedSum(filepath.Join(vendorDir, "SHA256SUMS"), name+".tar.xz")
	if err != nil {
		return "", err
	}
	dst := filepath.Join(cacheRoot, name+"-"+want[:16])
	tree := filepath.Join(dst, name)
	if _, err := os.Stat(tree); err == nil {
		return tree, nil
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(dst+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(tree); err == nil {
		return tree, nil
	}
	got, err := fileSum(tarball)
	if err != nil {
		return "", err
	}
	if got != want {
		return "", fmt.Errorf("%s: sha256 %s, SHA256SUMS says %s: a damaged or replaced tarball", tarball, got, want)
	}
	tmp := dst + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	if _, err := exec.LookPath("tar"); err != nil {
		return "", fmt.Errorf("unpacking %s: %w", tarball, os.ErrNotExist)
	}
	if out, err := exec.Command("tar", "-xJf", tarball, "-C", tmp).CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("unpacking %s: %v\n%s", tarball, err, out)
	}
	if _, err := os.Stat(filepath.Join(tmp, name)); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("%s holds no top directory %s", tarball, name)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", err
	}
	return tree, nil
}

// listedSum is the sha256 SHA256SUMS lists for file.
func listedSum(sums, file string) (string, error) {
	f, err := os.Open(sums)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && strings.TrimPrefix(fields[1], "*") == file && len(fields[0]) == 64 {
			return fields[0], nil
		}
	}
	return "", fmt.Errorf("%s does not list %s", sums, file)
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
