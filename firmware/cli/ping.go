package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// ping limits: a console command must end by itself even if nobody types
// ^C on a line that has gone quiet.
const (
	pingDefaultCount = 4
	pingMaxCount     = 20
	pingInterval     = time.Second
	pingWait         = 2 * time.Second // for the last reply
)

func runPing(ctx context.Context, s *session, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return usageError("ping")
	}
	count := pingDefaultCount
	if len(args) == 2 {
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 || n > pingMaxCount {
			return fmt.Errorf("ping: count %q is not a number from 1 to %d", clip(args[1], 20), pingMaxCount)
		}
		count = n
	}
	dst, err := resolve(ctx, args[0])
	if err != nil {
		return err
	}
	return ping(ctx, dst, count, func(format string, a ...any) { s.printf(format, a...) })
}

// resolve turns HOST into one address, an IP literal without a lookup.
func resolve(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ping: cannot resolve %q: %w", clip(host, 60), err)
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("ping: %q has no address", clip(host, 60))
	}
	return addrs[0].Unmap(), nil
}

// ping sends count echo requests to dst a second apart and prints each
// reply, then a summary. It returns early when ctx ends (^C).
func ping(ctx context.Context, dst netip.Addr, count int, printf func(string, ...any)) error {
	network, proto := "ip4:icmp", 1
	var reqType, replyType icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	if dst.Is6() {
		network, proto = "ip6:ipv6-icmp", 58
		reqType, replyType = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	conn, err := icmp.ListenPacket(network, "")
	if err != nil {
		return fmt.Errorf("ping: open ICMP socket: %w", err)
	}
	defer conn.Close()
	id := os.Getpid() & 0xffff
	printf("PING %s: %d echo requests\n", dst, count)
	sent, got := 0, 0
	var rttSum time.Duration
	buf := make([]byte, 1500)
	payload := []byte("flashgate console ping..........") // 32 bytes
	for seq := 1; seq <= count && ctx.Err() == nil; seq++ {
		msg := icmp.Message{Type: reqType, Body: &icmp.Echo{ID: id, Seq: seq, Data: payload}}
		wire, err := msg.Marshal(nil)
		if err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		start := time.Now()
		if _, err := conn.WriteTo(wire, &net.IPAddr{IP: dst.AsSlice(), Zone: dst.Zone()}); err != nil {
			printf("seq %d: send: %v\n", seq, err)
		} else {
			sent++
		}
		wait := pingInterval
		if seq == count {
			wait = pingWait
		}
		deadline := start.Add(wait)
		replied := false
		for ctx.Err() == nil {
			// Short reads so that ^C is noticed within a tenth of a second.
			conn.SetReadDeadline(minTime(deadline, time.Now().Add(100*time.Millisecond)))
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					if time.Now().Before(deadline) {
						continue
					}
					break
				}
				return fmt.Errorf("ping: receive: %w", err)
			}
			reply, err := icmp.ParseMessage(proto, buf[:n])
			if err != nil || reply.Type != replyType {
				continue
			}
			echo, ok := reply.Body.(*icmp.Echo)
			if !ok || echo.ID != id || echo.Seq != seq {
				continue
			}
			rtt := time.Since(start)
			rttSum += rtt
			got++
			replied = true
			printf("%d bytes from %s: seq=%d time=%.2f ms\n", len(echo.Data)+8, from, seq, float64(rtt.Microseconds())/1000)
			// Wait out the interval before the next request.
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(deadline)):
			}
			break
		}
		if !replied && ctx.Err() == nil {
			printf("seq %d: no reply\n", seq)
		}
	}
	loss := 0
	if sent > 0 {
		loss = 100 * (sent - got) / sent
	}
	printf("%d sent, %d received, %d%% lost", sent, got, loss)
	if got > 0 {
		printf(", average %.2f ms", float64((rttSum/time.Duration(got)).Microseconds())/1000)
	}
	printf("\n")
	return ctx.Err()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
