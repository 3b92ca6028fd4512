package esp

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// The SPI table against a map as its oracle: installs and deletes in a
// random order (tombstones reused, the table grown and cleaned), every SPI
// found exactly when the map has it.
func TestSPITable(t *testing.T) {
	var tab spiTable
	if tab.load(1234) != nil {
		t.Fatal("an empty table found an SA")
	}
	tab.remove(1234) // nothing to remove: no panic
	oracle := map[uint32]*SA{}
	rng := rand.New(rand.NewPCG(1, 2))
	var spis []uint32
	for step := range 20000 {
		if len(spis) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(spis))
			spi := spis[i]
			spis[i] = spis[len(spis)-1]
			spis = spis[:len(spis)-1]
			tab.remove(spi)
			delete(oracle, spi)
		} else {
			// Some SPIs differ only in their high bits, some only in
			// their low ones.
			spi := rng.Uint32()
			switch step % 3 {
			case 1:
				spi = uint32(step)<<20 | 0x100
			case 2:
				spi = 0x1000000 + uint32(step)
			}
			if _, dup := oracle[spi]; dup || spi < 256 {
				continue
			}
			sa := &SA{SPI: spi}
			tab.store(sa)
			oracle[spi] = sa
			spis = append(spis, spi)
		}
		if step%1000 == 0 || step == 19999 {
			for spi, sa := range oracle {
				if got := tab.load(spi); got != sa {
					t.Fatalf("step %d: SPI %08x: %p, want %p", step, spi, got, sa)
				}
			}
			for range 100 {
				spi := rng.Uint32()
				if got := tab.load(spi); got != oracle[spi] {
					t.Fatalf("step %d: SPI %08x not installed: found %p", step, spi, got)
				}
			}
			if tab.live != len(oracle) {
				t.Fatalf("step %d: %d live, the oracle has %d", step, tab.live, len(oracle))
			}
			if n := len(*tab.slots.Load()); 2*tab.taken > n {
				t.Fatalf("step %d: %d of %d slots taken: probes may not end", step, tab.taken, n)
			}
		}
	}
}

// Readers without a lock while one writer installs, deletes and grows the
// table: an SA that stays installed is always found (go test -race checks
// the rest).
func TestSPITableConcurrent(t *testing.T) {
	var tab spiTable
	var mu sync.Mutex // the Device's: one writer at a time
	stay := &SA{SPI: 0xabcdef01}
	tab.store(stay)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if tab.load(stay.SPI) != stay {
					t.Error("an installed SA was not found while the table changed")
					return
				}
				tab.load(rand.Uint32())
			}
		}()
	}
	for i := range uint32(5000) {
		mu.Lock()
		tab.store(&SA{SPI: 0x1000 + i})
		if i >= 100 {
			tab.remove(0x1000 + i - 100)
		}
		mu.Unlock()
	}
	stop.Store(true)
	wg.Wait()
}

// An SA stays in Go's 288-byte size class on 64-bit builds: a hub holds two
// per branch, and a field added in the wrong place moves it to 320.
func TestSASize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit builds")
	}
	if n := unsafe.Sizeof(SA{}); n > 288 {
		t.Errorf("an SA is %d bytes, more than the 288-byte size class (mind the padding between fields)", n)
	}
}
