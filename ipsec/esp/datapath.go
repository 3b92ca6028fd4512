package esp

// The packet workers: one TX and one RX goroutine per TUN queue and socket.

import (
	"errors"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/internal/offheap"
)

const (
	tunBatch  = 8                  // TUN reads per send batch
	txBufSize = 8 * (65536 + 8192) // ESP packets of one batch, back to back
)

// encryptLoop is one TX worker: it reads packets (often 64 KiB TSO
// super-packets) from one TUN queue, cuts them into segments, encrypts each
// in place in a buffer where the ESP packets of one peer lie back to back,
// and hands them to the kernel with one sendmmsg, each run of same-sized
// packets as one UDP GSO message.
//
// ifID is 0 for the policy TUN, whose packets go to the SA whose selectors
// cover them, and a route tunnel's if_id for that tunnel's TUN, whose
// packets go only to that tunnel's SAs.
func (d *Device) encryptLoop(q *os.File, sock, raw *udpSocket, ifID uint32, wg *sync.WaitGroup) {
	defer wg.Done()
	rc, err := q.SyscallConn()
	if err != nil {
		return
	}
	// The batch's 1.1 MB is this goroutine's alone, for its life, and
	// off the Go heap (internal/offheap): as live heap it let as much
	// again of garbage pile up before a collection. Nothing keeps a
	// slice of it past a packet's handling.
	const frameLen = vnetHdrLen + 65535
	mem := offheap.New(tunBatch*frameLen + txBufSize)
	defer mem.Free()
	r := &tunReader{}
	for i := 0; i < tunBatch; i++ {
		r.bufs = append(r.bufs, mem.B[i*frameLen:(i+1)*frameLen:(i+1)*frameLen])
	}
	r.fn = r.read
	tx := &txBatch{buf: mem.B[tunBatch*frameLen:], udp: sock, raw: raw, d: d}
	var seg segmenter
	var h vnetHdr
	var missing missingReporter
	for {
		r.n, r.err = 0, nil
		if err := rc.Read(r.fn); err != nil || r.err != nil {
			return // the TUN was closed
		}
		t := d.table.Load()
		var last, held *SA
		for i := 0; i < r.n; i++ {
			frame := r.bufs[i][:r.lens[i]]
			if len(frame) < vnetHdrLen+20 {
				d.Counters.BadOffload.Add(1)
				continue
			}
			h.decode(frame)
			pkt := frame[vnetHdrLen:]
			sa := t.outbound(pkt, ifID)
			if sa == nil {
				d.Counters.NoSA.Add(1)
				if d.missing != nil && ifID == 0 {
					missing.report(d, pkt)
				}
				continue
			}
			if err := seg.reset(h, pkt); err != nil {
				d.Counters.BadOffload.Add(1)
				continue
			}
			if sa != held {
				// At most one SA held at a time (no lock order to get
				// wrong): what was sealed for the previous one goes out
				// before its lock is released.
				if held != nil {
					tx.flush()
					held.txMu.Unlock()
				}
				sa.txMu.Lock()
				held = sa
			}
			to := netip.AddrPortFrom(sa.Dst, sa.EncapDstPort)
			hl := sa.headerLen()
			for {
				if !tx.fits(hl + seg.maxSegment() + Tailroom) {
					tx.flush()
				}
				at := tx.used + hl
				n := seg.next(tx.buf[at:])
				if n == 0 {
					break
				}
				esp, err := sa.Encap(tx.buf[:at+n], at, n)
				if err != nil {
					d.Counters.EncapErrors.Add(1)
					continue
				}
				tx.add(len(esp), to)
			}
			last = sa
		}
		tx.flush()
		if held != nil {
			held.txMu.Unlock()
		}
		if last != nil {
			last.Touch(time.Now())
		}
	}
}

// tunReader reads up to tunBatch packets from a non-blocking TUN queue in
// one wake-up.
type tunReader struct {
	bufs [][]byte
	lens [tunBatch]int
	n    int
	err  error
	fn   func(fd uintptr) bool
}

func (r *tunReader) read(fd uintptr) bool {
	for r.n < len(r.bufs) {
		b := r.bufs[r.n]
		n, _, e := unix.Syscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == unix.EAGAIN {
			return r.n > 0
		}
		if e != 0 {
			if r.n == 0 {
				r.err = e
			}
			return true
		}
		r.lens[r.n] = int(n)
		r.n++
	}
	return true
}

// txBatch lays ESP packets back to back and groups runs to the same peer
// of equal size (the last may be shorter) into UDP GSO messages.
type txBatch struct {
	buf      []byte
	used     int
	udp, raw *udpSocket
	d        *Device

	open   bool // a message is being built from start to used
	closed bool // its last packet was short: nothing more may join
	start  int
	seg    int
	count  int
	to     netip.AddrPort
}

func (b *txBatch) fits(n int) bool { return b.used+n <= len(b.buf) }

// add accounts for the ESP packet of n bytes just written at b.used.
func (b *txBatch) add(n int, to netip.AddrPort) {
	if b.open && b.udp.gso && to.Port() != 0 && !b.closed && to == b.to && n <= b.seg &&
		b.count < gsoMaxSegs && b.used+n-b.start <= 65000 {
		b.count++
		b.closed = n < b.seg
		b.used += n
		return
	}
	b.endMessage()
	b.open, b.closed, b.start, b.seg, b.count, b.to = true, false, b.used, n, 1, to
	b.used += n
}

func (b *txBatch) endMessage() {
	if !b.open {
		return
	}
	b.open = false
	data := b.buf[b.start:b.used]
	sock := b.udp
	if b.to.Port() == 0 {
		sock = b.raw
	}
	if !sock.queue(data, b.seg, b.to) {
		b.sendOn(sock)
		sock.queue(data, b.seg, b.to)
	}
}

func (b *txBatch) send() {
	b.sendOn(b.udp)
	if b.raw != nil {
		b.sendOn(b.raw)
	}
}

func (b *txBatch) sendOn(s *udpSocket) {
	if err := s.flush(); err != nil {
		b.d.Counters.TxErrors.Add(1)
	}
}

// flush sends everything queued and empties the buffer.
func (b *txBatch) flush() {
	b.endMessage()
	b.send()
	b.used = 0
}

// decryptLoop is one RX worker: it receives batches of (GRO-merged)
// datagrams, hands IKE to the IKE handler, decrypts ESP in place and
// writes the inner packets to the TUN, merged back into TCP super-packets
// where the flow allows.
//
// worker is the index of the worker: a route tunnel's packets go to the
// same-numbered queue of its TUN.
func (d *Device) decryptLoop(sock *udpSocket, q *os.File, worker int) {
	defer d.wg.Done()
	co, err := d.tunCoalescer(q)
	if err != nil {
		return
	}
	sinks := &rxSinks{d: d, main: co, worker: worker, routes: map[*routeTUN]*coalescer{}}
	for {
		n, err := sock.recv()
		if err != nil {
			if errors.Is(err, os.ErrClosed) || d.closed.Load() {
				return
			}
			continue
		}
		t := d.table.Load()
		var last *SA
		for i := 0; i < n; i++ {
			data, segSize, from, truncated := sock.message(i)
			if truncated {
				d.Counters.Oversized.Add(1)
				continue
			}
			for off := 0; off < len(data); off += segSize {
				dg := data[off:min(off+segSize, len(data))]
				if sa := d.receive(t, dg, from, sinks); sa != nil {
					last = sa
				}
			}
		}
		if err := sinks.flush(t); err != nil {
			return
		}
		if last != nil {
			last.Touch(time.Now())
		}
	}
}

// receive handles one datagram from port 4500 or one raw ESP packet.
func (d *Device) receive(t *saTable, dg []byte, from netip.AddrPort, sinks *rxSinks) *SA {
	udp := from.Port() != 0 // raw ESP has no port, and no IKE or keepalives
	switch {
	case udp && len(dg) == 1 && dg[0] == 0xff:
		d.Counters.Keepalives.Add(1)
		return nil
	case udp && len(dg) >= 4 && dg[0]|dg[1]|dg[2]|dg[3] == 0:
		if h := d.ike.Load(); h != nil {
			d.Counters.IKE.Add(1)
			(*h)(dg[4:], from)
		}
		return nil
	case len(dg) < espHeaderLen:
		d.Counters.Truncated.Add(1)
		return nil
	}
	sa := d.inbound.load(SPIOf(dg))
	if sa == nil {
		d.Counters.UnknownSPI.Add(1)
		return nil
	}
	inner, err := sa.Decap(dg)
	if err != nil {
		if errors.Is(err, ErrTruncated) {
			d.Counters.Truncated.Add(1)
		}
		return sa
	}
	co := sinks.forSA(t, sa)
	if co == nil {
		d.Counters.RxErrors.Add(1) // its route tunnel's TUN is gone
		return sa
	}
	if err := co.add(inner); err != nil {
		d.Counters.RxErrors.Add(1)
	}
	return sa
}

// tunCoalescer returns a coalescer writing to the TUN queue q.
func (d *Device) tunCoalescer(q *os.File) (*coalescer, error) {
	raw, err := q.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &tunWriter{}
	w.fn = w.write
	return newCoalescer(func(frame []byte) error {
		w.frame, w.err = frame, nil
		if err := raw.Write(w.fn); err != nil {
			return err
		}
		if w.err != nil {
			d.Counters.RxErrors.Add(1)
		}
		return nil
	}), nil
}

// rxSinks are where one RX worker writes decrypted packets: the policy
// TUN, or the TUN of the route tunnel the SA belongs to.
type rxSinks struct {
	d      *Device
	main   *coalescer
	worker int
	routes map[*routeTUN]*coalescer
}

func (s *rxSinks) forSA(t *saTable, sa *SA) *coalescer {
	if sa.IfID == 0 {
		return s.main
	}
	rt := t.tuns[sa.IfID]
	if rt == nil {
		return nil
	}
	co := s.routes[rt]
	if co == nil {
		var err error
		if co, err = s.d.tunCoalescer(rt.tun.queues[s.worker%len(rt.tun.queues)]); err != nil {
			return nil
		}
		s.routes[rt] = co
	}
	return co
}

// flush writes what is pending. An error on the policy TUN ends the worker
// (the Device is closing); a route tunnel's TUN that fails was removed, and
// is forgotten.
func (s *rxSinks) flush(t *saTable) error {
	for rt, co := range s.routes {
		if err := co.flush(); err != nil || t.tuns[rt.ifID] != rt {
			delete(s.routes, rt)
		}
	}
	return s.main.flush()
}

// tunWriter writes one frame to a non-blocking TUN queue.
type tunWriter struct {
	frame []byte
	err   error
	fn    func(fd uintptr) bool
}

func (w *tunWriter) write(fd uintptr) bool {
	_, _, e := unix.Syscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.frame[0])), uintptr(len(w.frame)))
	if e == unix.EAGAIN {
		return false
	}
	if e != 0 {
		w.err = syscall.Errno(e)
	}
	return true
}
