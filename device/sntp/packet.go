package sntp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// PacketSize is an NTP packet without extension fields or authenticator.
const PacketSize = 48

// Modes of the first byte (RFC 5905, figure 10).
const (
	ModeClient = 3
	ModeServer = 4
)

// Packet is an NTP packet's header (RFC 5905, section 7.3). Timestamps are
// in NTP's 64-bit format: seconds since 1900 in the high 32 bits, the
// fraction in the low.
type Packet struct {
	Leap      uint8 // leap indicator, 0-3; 3: the server is not synchronised
	Version   uint8 // 1-7
	Mode      uint8 // 0-7
	Stratum   uint8 // 0: kiss-o'-death; 1: a reference clock; 2-15: servers
	Poll      int8
	Precision int8
	RootDelay uint32
	RootDisp  uint32
	RefID     [4]byte // stratum 0: the kiss code in ASCII
	Ref       uint64
	Origin    uint64 // the client's transmit timestamp, echoed
	Receive   uint64 // when the server received the request
	Transmit  uint64 // when the server sent the answer
}

// Parse reads an NTP packet: at least PacketSize bytes; what follows
// (extension fields, a MAC) is ignored.
func Parse(b []byte) (Packet, error) {
	if len(b) < PacketSize {
		return Packet{}, fmt.Errorf("NTP packet of %d bytes: want at least %d", len(b), PacketSize)
	}
	p := Packet{
		Leap:      b[0] >> 6,
		Version:   b[0] >> 3 & 7,
		Mode:      b[0] & 7,
		Stratum:   b[1],
		Poll:      int8(b[2]),
		Precision: int8(b[3]),
		RootDelay: binary.BigEndian.Uint32(b[4:]),
		RootDisp:  binary.BigEndian.Uint32(b[8:]),
		Ref:       binary.BigEndian.Uint64(b[16:]),
		Origin:    binary.BigEndian.Uint64(b[24:]),
		Receive:   binary.BigEndian.Uint64(b[32:]),
		Transmit:  binary.BigEndian.Uint64(b[40:]),
	}
	copy(p.RefID[:], b[12:16])
	return p, nil
}

// Marshal is p's PacketSize bytes.
func (p Packet) Marshal() []byte {
	b := make([]byte, PacketSize)
	b[0] = p.Leap<<6 | (p.Version&7)<<3 | p.Mode&7
	b[1] = p.Stratum
	b[2] = byte(p.Poll)
	b[3] = byte(p.Precision)
	binary.BigEndian.PutUint32(b[4:], p.RootDelay)
	binary.BigEndian.PutUint32(b[8:], p.RootDisp)
	copy(b[12:16], p.RefID[:])
	binary.BigEndian.PutUint64(b[16:], p.Ref)
	binary.BigEndian.PutUint64(b[24:], p.Origin)
	binary.BigEndian.PutUint64(b[32:], p.Receive)
	binary.BigEndian.PutUint64(b[40:], p.Transmit)
	return b
}

// CheckAnswer refuses an answer a client must not use (RFC 4330 section
// 5, RFC 5905 section 7.4): the error says why. nonce is the request's
// transmit timestamp.
func (p Packet) CheckAnswer(nonce uint64) error {
	switch {
	case p.Mode != ModeServer:
		return fmt.Errorf("mode %d, want %d (server)", p.Mode, ModeServer)
	case p.Version < 3 || p.Version > 4:
		return fmt.Errorf("version %d, want 3 or 4", p.Version)
	case p.Stratum == 0:
		return fmt.Errorf("kiss-o'-death %q: the server refuses to answer", kissCode(p.RefID))
	case p.Stratum > 15:
		return fmt.Errorf("stratum %d: the server is not synchronised", p.Stratum)
	case p.Leap == 3:
		return errors.New("leap indicator 3: the server's clock is not synchronised")
	case p.Transmit == 0:
		return errors.New("transmit timestamp 0")
	case p.Origin != nonce:
		return fmt.Errorf("origin timestamp %#x, want the request's %#x: not an answer to it", p.Origin, nonce)
	}
	return nil
}

// kissCode is a kiss-o'-death's code, printable.
func kissCode(id [4]byte) string {
	out := make([]byte, 0, 4)
	for _, c := range id {
		if c >= 0x20 && c < 0x7f {
			out = append(out, c)
		} else if c != 0 {
			out = append(out, '?')
		}
	}
	return string(out)
}

// ntpEpochOffset is 1900-01-01 to 1970-01-01 in seconds.
const ntpEpochOffset = 2208988800

// Time is an NTP timestamp as a time: era 0 (1900-2036) when its top bit
// is set, era 1 (2036-2172) when not, as RFC 4330 section 3 advises.
func Time(ts uint64) time.Time {
	sec := int64(ts >> 32)
	if sec&0x80000000 == 0 {
		sec += 1 << 32
	}
	frac := int64(ts & 0xffffffff)
	nsec := frac * 1e9 >> 32
	return time.Unix(sec-ntpEpochOffset, nsec).UTC()
}

// Timestamp is t in NTP's format (the inverse of Time within its eras).
func Timestamp(t time.Time) uint64 {
	sec := uint64(t.Unix()+ntpEpochOffset) & 0xffffffff
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return sec<<32 | frac
}
