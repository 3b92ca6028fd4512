package netd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The SNTP client's wire format: the 48-byte NTP header of RFC 5905
// section 7.3, which is all an SNTP client (RFC 4330) sends and reads.
// Extension fields and a MAC after it are ignored.

const (
	ntpHeaderLen = 48

	ntpModeClient = 3
	ntpModeServer = 4

	ntpLeapAlarm = 3 // the server's clock is not synchronized

	// ntpEpochOffset is 1900-01-01 (NTP era 0) to 1970-01-01 in seconds.
	ntpEpochOffset = 2208988800
)

// ntpPacket is the NTP header.
type ntpPacket struct {
	Leap      uint8 // 2 bits
	Version   uint8 // 3 bits
	Mode      uint8 // 3 bits
	Stratum   uint8
	Poll      int8 // log2 seconds
	Precision int8 // log2 seconds
	RootDelay uint32
	RootDisp  uint32
	RefID     [4]byte
	RefTime   ntpTime
	Origin    ntpTime // the client's Transmit, echoed
	Receive   ntpTime // when the request arrived at the server
	Transmit  ntpTime // when the reply left the server
}

// ntpTime is an NTP timestamp: seconds since 1900 in the upper 32 bits,
// the fraction of a second in the lower 32.
type ntpTime uint64

// toNTPTime converts t, which must lie in 1968-2104 (the era rule of
// ntpTime.Time), to an NTP timestamp.
func toNTPTime(t time.Time) ntpTime {
	secs := uint64(t.Unix()+ntpEpochOffset) & 0xffffffff
	frac := (uint64(t.Nanosecond()) << 32) / 1e9
	return ntpTime(secs<<32 | frac)
}

// Time converts the timestamp with RFC 4330's rule for the era: a
// seconds field with its top bit clear is after 2036-02-07 06:28:16 UTC
// (era 1), so timestamps from 1968 to 2104 convert correctly.
func (n ntpTime) Time() time.Time {
	secs := int64(n >> 32)
	if secs&0x80000000 == 0 {
		secs += 1 << 32
	}
	nanos := (int64(n&0xffffffff)*1e9 + 1<<31) >> 32 // rounded
	return time.Unix(secs-ntpEpochOffset, nanos)
}

func (p *ntpPacket) marshal() []byte {
	b := make([]byte, ntpHeaderLen)
	b[0] = p.Leap<<6 | (p.Version&7)<<3 | p.Mode&7
	b[1] = p.Stratum
	b[2] = byte(p.Poll)
	b[3] = byte(p.Precision)
	binary.BigEndian.PutUint32(b[4:], p.RootDelay)
	binary.BigEndian.PutUint32(b[8:], p.RootDisp)
	copy(b[12:16], p.RefID[:])
	binary.BigEndian.PutUint64(b[16:], uint64(p.RefTime))
	binary.BigEndian.PutUint64(b[24:], uint64(p.Origin))
	binary.BigEndian.PutUint64(b[32:], uint64(p.Receive))
	binary.BigEndian.PutUint64(b[40:], uint64(p.Transmit))
	return b
}

var errShortNTP = errors.New("NTP packet shorter than its 48-byte header")

// parseNTPPacket decodes the header of an NTP packet; it checks only the
// length: what makes a reply acceptable is checkReply's business.
func parseNTPPacket(b []byte) (ntpPacket, error) {
	if len(b) < ntpHeaderLen {
		return ntpPacket{}, fmt.Errorf("%w (%d bytes)", errShortNTP, len(b))
	}
	p := ntpPacket{
		Leap:      b[0] >> 6,
		Version:   b[0] >> 3 & 7,
		Mode:      b[0] & 7,
		Stratum:   b[1],
		Poll:      int8(b[2]),
		Precision: int8(b[3]),
		RootDelay: binary.BigEndian.Uint32(b[4:]),
		RootDisp:  binary.BigEndian.Uint32(b[8:]),
		RefTime:   ntpTime(binary.BigEndian.Uint64(b[16:])),
		Origin:    ntpTime(binary.BigEndian.Uint64(b[24:])),
		Receive:   ntpTime(binary.BigEndian.Uint64(b[32:])),
		Transmit:  ntpTime(binary.BigEndian.Uint64(b[40:])),
	}
	copy(p.RefID[:], b[12:16])
	return p, nil
}

// kissError is a server's Kiss-o'-Death (stratum 0, RFC 5905 section
// 7.4): DENY and RSTR say never to ask it again, RATE to ask less often.
type kissError struct{ code string }

func (e *kissError) Error() string { return "kiss-o'-death " + e.code }

// permanent reports whether the server asked not to be asked again.
func (e *kissError) permanent() bool { return e.code == "DENY" || e.code == "RSTR" }

// checkReply applies RFC 4330 section 5's checks to a server's answer to
// a request whose Transmit field was sent: a reply that fails them is not
// used to set the clock.
func checkReply(p ntpPacket, sent ntpTime) error {
	switch {
	case p.Mode != ntpModeServer:
		return fmt.Errorf("NTP reply in mode %d, not server mode", p.Mode)
	case p.Version < 3 || p.Version > 4:
		return fmt.Errorf("NTP version %d", p.Version)
	case p.Origin != sent:
		// Not the answer to our request: late, duplicated or forged.
		return errors.New("NTP reply does not answer our request (origin timestamp differs)")
	case p.Stratum == 0:
		code := string(p.RefID[:])
		for i, c := range p.RefID {
			if c < 0x20 || c > 0x7e {
				code = code[:i]
				break
			}
		}
		return &kissError{code: code}
	case p.Stratum > 15:
		return fmt.Errorf("NTP stratum %d (unsynchronized)", p.Stratum)
	case p.Leap == ntpLeapAlarm:
		return errors.New("the NTP server's clock is not synchronized (leap indicator 3)")
	case p.Transmit == 0:
		return errors.New("NTP reply without a transmit timestamp")
	}
	return nil
}

// clockOffset returns the offset of the server's clock from ours and the
// round-trip delay, from the four timestamps of an exchange (RFC 5905
// section 8): t1 our send, t2 the server's receive, t3 its send, t4 our
// receive. Differences are taken before halving so that offsets of more
// than 68 years cannot overflow.
func clockOffset(t1, t2, t3, t4 time.Time) (offset, delay time.Duration) {
	a, b := t2.Sub(t1), t3.Sub(t4)
	offset = a/2 + b/2
	delay = t4.Sub(t1) - t3.Sub(t2)
	if delay < 0 { // a server whose clock runs backwards within the exchange
		delay = 0
	}
	return offset, delay
}

// shortSeconds converts an NTP short format (16.16 fixed point seconds).
func shortSeconds(v uint32) float64 { return float64(v) / 65536 }
