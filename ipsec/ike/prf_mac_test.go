package ike

import (
	"bytes"
	"crypto/hmac"
	"fmt"
	"sync"
	"testing"
)

// TestPRFMatchesHMAC: the PRFs' own HMAC gives crypto/hmac's result for
// every hash, keys shorter than, as long as and longer than a block, and
// states reused from the pool, also from goroutines at once; prf+ is the
// RFC's chain of them.
func TestPRFMatchesHMAC(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 20)
	for _, id := range []uint16{PRF_HMAC_MD5, PRF_HMAC_SHA1, PRF_HMAC_SHA2_256, PRF_HMAC_SHA2_384, PRF_HMAC_SHA2_512} {
		p, err := newPRF(id)
		if err != nil {
			t.Fatal(err)
		}
		check := func(keyLen, dataLen int) error {
			key := bytes.Repeat([]byte{byte(keyLen + 1)}, keyLen)
			want := hmac.New(p.hash, key)
			want.Write(data[:dataLen/2])
			want.Write(data[dataLen/2 : dataLen])
			if got := p.sum(key, data[:dataLen/2], data[dataLen/2:dataLen]); !bytes.Equal(got, want.Sum(nil)) {
				return fmt.Errorf("PRF %d, key of %d, data of %d: %x, want %x", id, keyLen, dataLen, got, want.Sum(nil))
			}
			// prf+: T1 = prf(K, S | 1), Tn = prf(K, Tn-1 | S | n).
			var exp, prev []byte
			for i := 1; len(exp) < 3*p.size+5; i++ {
				m := hmac.New(p.hash, key)
				m.Write(prev)
				m.Write(data[:dataLen])
				m.Write([]byte{byte(i)})
				prev = m.Sum(nil)
				exp = append(exp, prev...)
			}
			got, err := p.plus(key, data[:dataLen], 3*p.size+5)
			if err != nil || !bytes.Equal(got, exp[:3*p.size+5]) {
				return fmt.Errorf("prf+ %d, key of %d: %x, %v; want %x", id, keyLen, got, err, exp[:3*p.size+5])
			}
			return nil
		}
		for _, keyLen := range []int{0, 1, 20, 32, 63, 64, 65, 127, 128, 129, 300} {
			for _, dataLen := range []int{0, 1, 55, 64, 200, 320} {
				if err := check(keyLen, dataLen); err != nil {
					t.Fatal(err)
				}
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					if err := check((g*37+i)%150, (g+i)%320); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

// TestPRFAllocations: prf(K, S) allocates its result and nothing else
// once its pool holds a state (crypto/hmac took 8 allocations, ~450 bytes).
func TestPRFAllocations(t *testing.T) {
	p, _ := newPRF(PRF_HMAC_SHA2_256)
	key, data := make([]byte, 32), make([]byte, 100)
	p.sum(key, data)
	if n := testing.AllocsPerRun(100, func() { p.sum(key, data) }); n > 1 {
		t.Errorf("prf allocates %.1f times per call, want 1 (its result)", n)
	}
	if n := testing.AllocsPerRun(100, func() { p.plus(key, data, 200) }); n > 1 {
		t.Errorf("prf+ allocates %.1f times per call, want 1 (its result)", n)
	}
}
