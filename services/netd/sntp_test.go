package netd

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNTPTimeEras(t *testing.T) {
	for _, tc := range []struct {
		when time.Time
		ntp  ntpTime
	}{
		{time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), 2208988800 << 32},
		{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), 3155673600 << 32},
		{time.Date(2000, 1, 1, 0, 0, 0, 500_000_000, time.UTC), 3155673600<<32 | 1<<31},
		{time.Date(2036, 2, 7, 6, 28, 15, 0, time.UTC), 0xffffffff << 32},
		// The era rollover: the seconds field wraps to 0 and means 2036.
		{time.Date(2036, 2, 7, 6, 28, 16, 0, time.UTC), 0},
		{time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), (4102444800 + ntpEpochOffset - 1<<32) << 32},
	} {
		if got := toNTPTime(tc.when); got != tc.ntp {
			t.Errorf("toNTPTime(%s) = %#016x, want %#016x", tc.when, uint64(got), uint64(tc.ntp))
		}
		if got := tc.ntp.Time(); !got.Equal(tc.when) {
			t.Errorf("ntpTime(%#016x).Time() = %s, want %s", uint64(tc.ntp), got.UTC(), tc.when)
		}
	}
	// The fraction keeps nanoseconds within rounding.
	at := time.Date(2026, 11, 30, 9, 41, 59, 123456789, time.UTC)
	if d := toNTPTime(at).Time().Sub(at); d < -time.Nanosecond || d > time.Nanosecond {
		t.Errorf("round trip of %s is off by %v", at, d)
	}
}

// serverReply is a stratum-2 reply as ntpd sends it, from a capture's
// layout: LI 0, VN 4, mode 4, poll 6, precision -23.
const serverReply = "240206e9" + "00000a8b" + "00000c7e" + "c0000201" +
	"ece1a5b0" + "1a2b3c4d" + "0102030405060708" + "ece1a5c2" + "00000000" + "ece1a5c2" + "00418937"

func TestParseNTPPacket(t *testing.T) {
	b, _ := hex.DecodeString(serverReply)
	p, err := parseNTPPacket(b)
	if err != nil {
		t.Fatal(err)
	}
	want := ntpPacket{Leap: 0, Version: 4, Mode: ntpModeServer, Stratum: 2, Poll: 6, Precision: -23,
		RootDelay: 0xa8b, RootDisp: 0xc7e, RefID: [4]byte{192, 0, 2, 1},
		RefTime: 0xece1a5b01a2b3c4d, Origin: 0x0102030405060708, Receive: 0xece1a5c200000000, Transmit: 0xece1a5c200418937}
	if p != want {
		t.Errorf("parsed\n  %+v\nwant\n  %+v", p, want)
	}
	if got := p.marshal(); !bytes.Equal(got, b) {
		t.Errorf("marshal: %x, want %x", got, b)
	}
	// Extension fields or a MAC after the header are ignored.
	if q, err := parseNTPPacket(append(b, make([]byte, 20)...)); err != nil || q != want {
		t.Errorf("with a MAC: %+v, %v", q, err)
	}
	if _, err := parseNTPPacket(b[:47]); !errors.Is(err, errShortNTP) {
		t.Errorf("47 bytes: %v, want errShortNTP", err)
	}
}

func TestCheckReply(t *testing.T) {
	const sent = ntpTime(0x0102030405060708)
	good := ntpPacket{Version: 4, Mode: ntpModeServer, Stratum: 2, Origin: sent, Receive: 1 << 32, Transmit: 1<<32 + 1}
	for _, tc := range []struct {
		name   string
		change func(*ntpPacket)
		want   string // "" for accepted
	}{
		{"good", func(p *ntpPacket) {}, ""},
		{"NTPv3", func(p *ntpPacket) { p.Version = 3 }, ""},
		{"client mode", func(p *ntpPacket) { p.Mode = ntpModeClient }, "mode 3, not server mode"},
		{"version 5", func(p *ntpPacket) { p.Version = 5 }, "NTP version 5"},
		{"not our request", func(p *ntpPacket) { p.Origin++ }, "origin timestamp differs"},
		{"deny", func(p *ntpPacket) { p.Stratum = 0; p.RefID = [4]byte{'D', 'E', 'N', 'Y'} }, "kiss-o'-death DENY"},
		{"kiss with junk", func(p *ntpPacket) { p.Stratum = 0; p.RefID = [4]byte{'R', 'A', 0, 0xff} }, "kiss-o'-death RA"},
		{"stratum 16", func(p *ntpPacket) { p.Stratum = 16 }, "stratum 16"},
		{"unsynchronized", func(p *ntpPacket) { p.Leap = ntpLeapAlarm }, "not synchronized"},
		{"no transmit time", func(p *ntpPacket) { p.Transmit = 0 }, "without a transmit timestamp"},
	} {
		p := good
		tc.change(&p)
		err := checkReply(p, sent)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: checkReply = %v, want %q", tc.name, err, tc.want)
		}
	}
	var kiss *kissError
	p := good
	p.Stratum, p.RefID = 0, [4]byte{'R', 'A', 'T', 'E'}
	if err := checkReply(p, sent); !errors.As(err, &kiss) || kiss.permanent() {
		t.Errorf("RATE: %v; want a kiss that is not permanent", err)
	}
}

func TestClockOffset(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name           string
		t1, t2, t3, t4 time.Time
		offset, delay  time.Duration
	}{
		{"in step, 10 ms each way", t0, t0.Add(ms(10)), t0.Add(ms(11)), t0.Add(ms(21)), 0, ms(20)},
		{"server 1 s ahead", t0, t0.Add(ms(1010)), t0.Add(ms(1011)), t0.Add(ms(21)), ms(1000), ms(20)},
		{"server 2 h behind", t0, t0.Add(-2*time.Hour + ms(5)), t0.Add(-2*time.Hour + ms(5)), t0.Add(ms(10)), -2 * time.Hour, ms(10)},
		{"asymmetric path", t0, t0.Add(ms(30)), t0.Add(ms(30)), t0.Add(ms(40)), ms(10), ms(40)},
		{"100 years off", t0, t0.AddDate(100, 0, 0), t0.AddDate(100, 0, 0), t0, t0.AddDate(100, 0, 0).Sub(t0), 0},
	} {
		offset, delay := clockOffset(tc.t1, tc.t2, tc.t3, tc.t4)
		if offset != tc.offset || delay != tc.delay {
			t.Errorf("%s: offset %v delay %v, want %v and %v", tc.name, offset, delay, tc.offset, tc.delay)
		}
	}
}

// FuzzParseNTPPacket checks that any datagram parses without panicking,
// that what parses re-encodes to the same header, and that the checks and
// conversions of a reply take any values.
func FuzzParseNTPPacket(f *testing.F) {
	reply, _ := hex.DecodeString(serverReply)
	f.Add(reply)
	f.Add(make([]byte, 48))
	f.Add(bytes.Repeat([]byte{0xff}, 68))
	f.Add([]byte{0x23})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseNTPPacket(b)
		if err != nil {
			if len(b) >= ntpHeaderLen {
				t.Fatalf("a %d-byte packet did not parse: %v", len(b), err)
			}
			return
		}
		if got := p.marshal(); !bytes.Equal(got, b[:ntpHeaderLen]) {
			t.Fatalf("re-encoded %x, want %x", got, b[:ntpHeaderLen])
		}
		if err := checkReply(p, p.Origin); err == nil {
			clockOffset(time.Now(), p.Receive.Time(), p.Transmit.Time(), time.Now())
		}
	})
}
