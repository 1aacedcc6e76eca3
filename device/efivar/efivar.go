package efivar

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf16"

	"golang.org/x/sys/unix"
)

// GlobalGUID is EFI_GLOBAL_VARIABLE, the vendor of the Boot variables, as
// efivarfs spells it in file names.
const GlobalGUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"

// Variable attributes (UEFI 8.2): what a boot variable is written with.
const (
	NonVolatile       = 0x1
	BootserviceAccess = 0x2
	RuntimeAccess     = 0x4
	BootAttrs         = NonVolatile | BootserviceAccess | RuntimeAccess
)

// LoadOptionActive marks a load option the boot manager may boot.
const LoadOptionActive = 0x1

// LoadOption is one Boot#### variable: a UKI on a GPT partition.
//
//	0  u32 attributes (LoadOptionActive)
//	4  u16 length of the device path list
//	6  UTF-16LE description, NUL-terminated
//	   device path list:
//	     hard drive node: type 4, subtype 1, length 42:
//	       u32 partition number, u64 start LBA, u64 size in LBAs,
//	       [16] partition GUID (GPT byte order), u8 2 (GPT), u8 2 (GUID)
//	     file path node: type 4, subtype 4, length 4+2n: UTF-16LE path, NUL-terminated
//	     end node: type 0x7f, subtype 0xff, length 4
//	   optional data: none
type LoadOption struct {
	Active      bool
	Description string
	Partition   uint32   // 1-based partition number
	Start, Size uint64   // in 512-byte LBAs
	PartGUID    [16]byte // unique partition GUID, as the GPT entry stores it
	Path        string   // on the partition, with backslashes: \EFI\nvboot\a.efi
}

const (
	typeMedia, subHardDrive, subFilePath = 4, 1, 4
	typeEnd, subEndEntire                = 0x7f, 0xff
	hardDriveLen                         = 42
)

func utf16z(s string) []byte {
	u := utf16.Encode([]rune(s + "\x00"))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

// Marshal encodes o as a Boot#### variable's data.
func (o *LoadOption) Marshal() ([]byte, error) {
	if !strings.HasPrefix(o.Path, `\`) || strings.Contains(o.Path, "/") {
		return nil, fmt.Errorf("load option path %q: want an absolute path with backslashes, such as \\EFI\\nvboot\\a.efi", o.Path)
	}
	var dp bytes.Buffer
	hd := make([]byte, hardDriveLen)
	hd[0], hd[1] = typeMedia, subHardDrive
	binary.LittleEndian.PutUint16(hd[2:], hardDriveLen)
	binary.LittleEndian.PutUint32(hd[4:], o.Partition)
	binary.LittleEndian.PutUint64(hd[8:], o.Start)
	binary.LittleEndian.PutUint64(hd[16:], o.Size)
	copy(hd[24:40], o.PartGUID[:])
	hd[40], hd[41] = 2, 2
	dp.Write(hd)
	path := utf16z(o.Path)
	fp := make([]byte, 4, 4+len(path))
	fp[0], fp[1] = typeMedia, subFilePath
	binary.LittleEndian.PutUint16(fp[2:], uint16(4+len(path)))
	dp.Write(append(fp, path...))
	dp.Write([]byte{typeEnd, subEndEntire, 4, 0})
	var b bytes.Buffer
	var attrs uint32
	if o.Active {
		attrs = LoadOptionActive
	}
	binary.Write(&b, binary.LittleEndian, attrs)
	binary.Write(&b, binary.LittleEndian, uint16(dp.Len()))
	b.Write(utf16z(o.Description))
	b.Write(dp.Bytes())
	return b.Bytes(), nil
}

// ParseLoadOption decodes a Boot#### variable's data written by Marshal
// (a hard-drive node, a file path, the end); other shapes, as firmware
// writes for its own entries, are an error naming what differs.
func ParseLoadOption(b []byte) (*LoadOption, error) {
	if len(b) < 8 {
		return nil, errors.New("load option: shorter than its fixed fields")
	}
	o := &LoadOption{Active: binary.LittleEndian.Uint32(b)&LoadOptionActive != 0}
	dplen := int(binary.LittleEndian.Uint16(b[4:]))
	rest := b[6:]
	desc, n, err := readUTF16z(rest)
	if err != nil {
		return nil, fmt.Errorf("load option description: %w", err)
	}
	o.Description, rest = desc, rest[n:]
	if dplen > len(rest) {
		return nil, fmt.Errorf("load option: device path list of %d bytes, %d left", dplen, len(rest))
	}
	dp := rest[:dplen]
	node := func() (typ, sub byte, body []byte, err error) {
		if len(dp) < 4 {
			return 0, 0, nil, errors.New("device path: truncated node")
		}
		l := int(binary.LittleEndian.Uint16(dp[2:]))
		if l < 4 || l > len(dp) {
			return 0, 0, nil, fmt.Errorf("device path: node length %d", l)
		}
		typ, sub, body, dp = dp[0], dp[1], dp[4:l], dp[l:]
		return typ, sub, body, nil
	}
	typ, sub, body, err := node()
	if err != nil {
		return nil, err
	}
	if typ != typeMedia || sub != subHardDrive || len(body) != hardDriveLen-4 || body[36] != 2 || body[37] != 2 {
		return nil, fmt.Errorf("device path: first node is type %d subtype %d, not a GPT hard drive", typ, sub)
	}
	o.Partition = binary.LittleEndian.Uint32(body)
	o.Start, o.Size = binary.LittleEndian.Uint64(body[4:]), binary.LittleEndian.Uint64(body[12:])
	copy(o.PartGUID[:], body[20:36])
	if typ, sub, body, err = node(); err != nil {
		return nil, err
	}
	if typ != typeMedia || sub != subFilePath {
		return nil, fmt.Errorf("device path: second node is type %d subtype %d, not a file path", typ, sub)
	}
	if o.Path, n, err = readUTF16z(body); err != nil || n != len(body) {
		return nil, fmt.Errorf("device path: file path node: not one NUL-terminated UTF-16 string (%v)", err)
	}
	if typ, sub, _, err = node(); err != nil || typ != typeEnd || sub != subEndEntire || len(dp) != 0 {
		return nil, fmt.Errorf("device path: no end node after the file path (%v)", err)
	}
	return o, nil
}

func readUTF16z(b []byte) (string, int, error) {
	var u []uint16
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			return string(utf16.Decode(u)), i + 2, nil
		}
		u = append(u, c)
	}
	return "", 0, errors.New("no NUL terminator")
}

// MarshalOrder encodes BootOrder (or, one entry, BootNext).
func MarshalOrder(entries []uint16) []byte {
	b := make([]byte, 2*len(entries))
	for i, e := range entries {
		binary.LittleEndian.PutUint16(b[2*i:], e)
	}
	return b
}

// ParseOrder decodes BootOrder or BootNext.
func ParseOrder(b []byte) ([]uint16, error) {
	if len(b)%2 != 0 {
		return nil, fmt.Errorf("boot order of %d bytes: want a whole number of 16-bit entries", len(b))
	}
	e := make([]uint16, len(b)/2)
	for i := range e {
		e[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return e, nil
}

// BootName is the variable name of load option n: Boot0001.
func BootName(n uint16) string { return fmt.Sprintf("Boot%04X", n) }

// Vars is an efivarfs mount (normally /sys/firmware/efi/efivars).
type Vars struct{ Dir string }

func (v Vars) path(name string) string { return filepath.Join(v.Dir, name+"-"+GlobalGUID) }

// Get returns a global variable's attributes and data.
func (v Vars) Get(name string) (attrs uint32, data []byte, err error) {
	b, err := os.ReadFile(v.path(name))
	if err != nil {
		return 0, nil, fmt.Errorf("reading EFI variable %s: %w", name, err)
	}
	if len(b) < 4 {
		return 0, nil, fmt.Errorf("EFI variable %s: %d bytes, shorter than its attributes", name, len(b))
	}
	return binary.LittleEndian.Uint32(b), b[4:], nil
}

// Set writes a global variable with the boot attributes. efivarfs takes
// the attributes and the data in one write(2); it makes existing
// variables immutable (chattr +i) against stray writes, so the flag is
// cleared first, as efibootmgr does.
func (v Vars) Set(name string, data []byte) error {
	p := v.path(name)
	clearImmutable(p)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("writing EFI variable %s: %w", name, err)
	}
	b := make([]byte, 4, 4+len(data))
	binary.LittleEndian.PutUint32(b, BootAttrs)
	if _, err := f.Write(append(b, data...)); err != nil {
		f.Close()
		return fmt.Errorf("writing EFI variable %s: %w", name, err)
	}
	return f.Close()
}

// Delete removes a global variable; one that is not there is no error.
func (v Vars) Delete(name string) error {
	p := v.path(name)
	clearImmutable(p)
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("deleting EFI variable %s: %w", name, err)
	}
	return nil
}

// fsImmutableFL is FS_IMMUTABLE_FL (linux/fs.h), which x/sys/unix lacks.
const fsImmutableFL = 0x00000010

// clearImmutable drops FS_IMMUTABLE_FL from p where the filesystem has
// it; elsewhere (a test's tmpfs) the ioctl fails and nothing is needed.
func clearImmutable(p string) {
	f, err := os.Open(p)
	if err != nil {
		return
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsImmutableFL == 0 {
		return
	}
	unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags&^fsImmutableFL))
}
