package nvinit

import (
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"github.com/nvboot/nvboot/device/contract"
)

// The ioctl structures of <linux/if.h> and <linux/route.h>, amd64/arm64
// layout. The standard library has the request numbers but not these.
type ifreqAddr struct {
	Name [16]byte
	Addr syscall.RawSockaddrInet4
	_    [8]byte
}

type ifreqFlags struct {
	Name  [16]byte
	Flags uint16
	_     [22]byte
}

type rtentry struct {
	_       uint64
	Dst     syscall.RawSockaddrInet4
	Gateway syscall.RawSockaddrInet4
	Genmask syscall.RawSockaddrInet4
	Flags   uint16
	_       [6]byte
	_       uint64
	_       uintptr
	Metric  int16
	_       [6]byte
	Dev     uintptr
	_       [3]uint64
}

func inet4(a netip.Addr) syscall.RawSockaddrInet4 {
	return syscall.RawSockaddrInet4{Family: syscall.AF_INET, Addr: a.As4()}
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// ifUp sets IFF_UP (and keeps the other flags) on the interface.
func ifUp(fd int, name string) error {
	var fr ifreqFlags
	copy(fr.Name[:], name)
	if err := ioctl(fd, syscall.SIOCGIFFLAGS, unsafe.Pointer(&fr)); err != nil {
		return fmt.Errorf("interface %s: %w", name, err)
	}
	fr.Flags |= syscall.IFF_UP
	if err := ioctl(fd, syscall.SIOCSIFFLAGS, unsafe.Pointer(&fr)); err != nil {
		return fmt.Errorf("bringing %s up: %w", name, err)
	}
	return nil
}

// configureInterfaces brings loopback up (services and readiness checks dial
// 127.0.0.1) and gives each interface its static address and route.
func configureInterfaces(ifs []contract.Interface) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	defer syscall.Close(fd)
	if err := ifUp(fd, "lo"); err != nil {
		return err
	}
	for _, in := range ifs {
		p, err := netip.ParsePrefix(in.Address)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("interface %s: address %q: want IPv4 with a prefix length", in.Name, in.Address)
		}
		var ar ifreqAddr
		copy(ar.Name[:], in.Name)
		ar.Addr = inet4(p.Addr())
		if err := ioctl(fd, syscall.SIOCSIFADDR, unsafe.Pointer(&ar)); err != nil {
			return fmt.Errorf("interface %s: setting %s: %w", in.Name, in.Address, err)
		}
		mask := netip.MustParsePrefix("255.255.255.255/32").Addr().As4()
		bits := p.Bits()
		for i := range mask {
			n := min(max(bits-8*i, 0), 8)
			mask[i] = byte(0xff << (8 - n))
		}
		ar.Addr = inet4(netip.AddrFrom4(mask))
		if err := ioctl(fd, syscall.SIOCSIFNETMASK, unsafe.Pointer(&ar)); err != nil {
			return fmt.Errorf("interface %s: netmask: %w", in.Name, err)
		}
		if err := ifUp(fd, in.Name); err != nil {
			return err
		}
		if in.Gateway == "" {
			continue
		}
		gw, err := netip.ParseAddr(in.Gateway)
		if err != nil || !gw.Is4() {
			return fmt.Errorf("interface %s: gateway %q: want an IPv4 address", in.Name, in.Gateway)
		}
		dev := append([]byte(in.Name), 0)
		rt := rtentry{Dst: inet4(netip.IPv4Unspecified()), Gateway: inet4(gw), Genmask: inet4(netip.IPv4Unspecified()),
			Flags: syscall.RTF_UP | syscall.RTF_GATEWAY, Dev: uintptr(unsafe.Pointer(&dev[0]))}
		err = ioctl(fd, syscall.SIOCADDRT, unsafe.Pointer(&rt))
		if err != nil && err != syscall.EEXIST {
			return fmt.Errorf("interface %s: default route via %s: %w", in.Name, in.Gateway, err)
		}
	}
	return nil
}
