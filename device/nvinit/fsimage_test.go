package nvinit

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExt4SizeOfMke2fsImages reads the size of images mke2fs made, with and
// without the 64bit feature and with 1 KiB and 4 KiB blocks: the superblock
// offsets are the on-disk format's, not ours.
func TestExt4SizeOfMke2fsImages(t *testing.T) {
	if _, err := exec.LookPath("mke2fs"); err != nil {
		t.Skip("mke2fs not installed")
	}
	for _, tc := range []struct {
		name string
		args []string
		size int64
	}{
		{"64bit, 4k", []string{"-t", "ext4", "-O", "64bit", "-b", "4096"}, 24 << 20},
		{"no 64bit, 1k", []string{"-t", "ext4", "-O", "^64bit", "-b", "1024"}, 9 << 20},
		{"ext2", []string{"-t", "ext2", "-b", "2048"}, 6 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "fs.img")
			args := append([]string{"-q", "-F"}, tc.args...)
			args = append(args, img, fmt.Sprintf("%dk", tc.size>>10))
			if out, err := exec.Command("mke2fs", args...).CombinedOutput(); err != nil {
				t.Fatalf("mke2fs: %v\n%s", err, out)
			}
			head := make([]byte, headSize)
			f, err := os.Open(img)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := io.ReadFull(f, head); err != nil {
				t.Fatal(err)
			}
			if got, err := ext4Size(head); err != nil || got != tc.size {
				t.Errorf("ext4Size = %d, %v; want %d", got, err, tc.size)
			}
		})
	}
}

func TestExt4SizeHighBlocks(t *testing.T) {
	head := make([]byte, headSize)
	le := binary.LittleEndian
	le.PutUint16(head[sbOffset+sbMagic:], ext4Magic)
	le.PutUint32(head[sbOffset+sbLogBlockSize:], 2) // 4 KiB
	le.PutUint32(head[sbOffset+sbBlocksCountLo:], 16)
	le.PutUint32(head[sbOffset+sbBlocksCountHi:], 1)
	if got, _ := ext4Size(head); got != 16*4096 {
		t.Errorf("without 64bit the high word counts: %d", got)
	}
	le.PutUint32(head[sbOffset+sbFeatureIncompat:], incompat64Bit)
	if got, _ := ext4Size(head); got != (1<<32+16)*4096 {
		t.Errorf("with 64bit: %d, want %d", got, int64(1<<32+16)*4096)
	}
	le.PutUint32(head[sbOffset+sbLogBlockSize:], 9)
	if _, err := ext4Size(head); err == nil {
		t.Error("a 512 KiB block size was taken")
	}
}

// TestProvisionStreamChecks: the image's size is its superblock's; a stream
// that is shorter or longer, or a filesystem bigger than the device, is an
// error that names the device and the image, and only a stream that ends
// early gets further than the size check (with the head still zero).
func TestProvisionStreamChecks(t *testing.T) {
	img := fakeImage(hashA+"\n", 64<<10)
	// The whole body decompresses; only gzip's check at the end fails.
	badCRC := gzipped(t, img)
	badCRC[len(badCRC)-8] ^= 1
	for _, tc := range []struct {
		name    string
		stream  []byte
		devSize int
		err     string
		touched bool // the device was written (head zeroed, some body)
		gzip    bool // stream is gzip-compressed
	}{
		{"exact", img, 64 << 10, "", true, false},
		{"device larger", img, 96 << 10, "", true, false},
		{"short", img[:40<<10], 64 << 10, "ends 24576 bytes short", true, false},
		{"long", append(append([]byte{}, img...), 'x'), 64 << 10, "goes on past the 65536 bytes", true, false},
		{"gzip", gzipped(t, img), 64 << 10, "", true, true},
		{"gzip, bad CRC", badCRC, 64 << 10, "gzip: invalid checksum", true, true},
		{"too big for the device", img, 60 << 10, "the device only 61440", false, false},
		{"no superblock", make([]byte, 64<<10), 64 << 10, "no ext2/3/4 superblock", false, false},
		{"tiny", img[:100], 64 << 10, "shorter than the 4096-byte head", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := filepath.Join(t.TempDir(), "pmem1")
			old := bytes.Repeat([]byte{'O'}, tc.devSize)
			os.WriteFile(dev, old, 0o644)
			var r io.Reader = bytes.NewReader(tc.stream)
			if tc.gzip {
				zr, err := gzip.NewReader(r)
				if err != nil {
					t.Fatal(err)
				}
				r = zr
			}
			err := provisionStream("the-image", r, dev, nil)
			got := mustRead(t, dev)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got[:len(img)], img) || !bytes.Equal(got[len(img):], old[len(img):]) {
					t.Error("the device does not hold the image (and its old tail)")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), dev) || !strings.Contains(err.Error(), "the-image") {
				t.Fatalf("error %v: want %q, the device and the image named", err, tc.err)
			}
			switch {
			case !tc.touched && !bytes.Equal(got, old):
				t.Error("the device was written before the image was found wanting")
			case tc.touched && !bytes.Equal(got[:headSize], make([]byte, headSize)):
				t.Error("a failed provisioning left a head that could mount")
			}
		})
	}
}
