package bootfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// syslinux's ADV (auxiliary data vector): two 512-byte copies at the end of
// ldlinux.sys, each framed by two magic numbers and a checksum, holding
// tag-length-value records. ldlinux reads the first consistent copy at boot;
// a copy torn by a power cut fails its checksum and the other one is used.
// Write therefore writes and flushes the first copy, then the second.
const (
	advSize   = 512
	advMagic1 = 0x5a2d2fa5
	advMagic2 = 0xa3041767
	advMagic3 = 0xdd28bf64
	advData   = advSize - 12 // payload bytes per copy
)

// ADV tags. BootOnce and MenuSave are syslinux's own: ldlinux boots the
// boot-once command line and clears it before the boot; menu.c32 makes the
// MenuSave label the default. Upgrade is flashgate's upgrade record, which
// syslinux keeps untouched (it rewrites only the tags it sets).
const (
	TagBootOnce = 1
	TagMenuSave = 2
	TagUpgrade  = 0x46 // 'F'
)

// ADVPath is where the ADV lives on a FAT file system.
const ADVPath = "/ldlinux.sys"

// ADV is the decoded record set.
type ADV map[byte][]byte

// Flusher is what a device offers to put a write on the medium (os.File).
type Flusher interface{ Sync() error }

func advConsistent(b []byte) bool {
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != advMagic1 || le.Uint32(b[advSize-4:]) != advMagic3 {
		return false
	}
	var sum uint32
	for i := 4; i < advSize-4; i += 4 {
		sum += le.Uint32(b[i:])
	}
	return sum == advMagic2
}

func decodeADV(b []byte) (ADV, error) {
	a := ADV{}
	p := b[8 : advSize-4]
	for len(p) >= 2 {
		tag, n := p[0], int(p[1])
		if tag == 0 {
			break
		}
		if 2+n > len(p) {
			return nil, errors.New("ADV record runs past the end")
		}
		a[tag] = append([]byte(nil), p[2:2+n]...)
		p = p[2+n:]
	}
	return a, nil
}

func encodeADV(a ADV) ([]byte, error) {
	b := make([]byte, advSize)
	p := b[8:8]
	// Fixed order, so the same records give the same bytes.
	for tag := 1; tag < 256; tag++ {
		v, ok := a[byte(tag)]
		if !ok || len(v) == 0 {
			continue
		}
		if len(v) > 255 {
			return nil, fmt.Errorf("ADV tag %d: %d bytes, at most 255", tag, len(v))
		}
		p = append(p, byte(tag), byte(len(v)))
		p = append(p, v...)
	}
	if len(p) > advData {
		return nil, fmt.Errorf("ADV records take %d bytes, %d fit", len(p), advData)
	}
	le := binary.LittleEndian
	le.PutUint32(b[0:], advMagic1)
	le.PutUint32(b[advSize-4:], advMagic3)
	var sum uint32
	for i := 8; i < advSize-4; i += 4 {
		sum += le.Uint32(b[i:])
	}
	le.PutUint32(b[4:], advMagic2-sum)
	return b, nil
}

func (v *Volume) advFile() (*File, error) {
	f, err := v.Open(ADVPath)
	if err != nil {
		return nil, fmt.Errorf("syslinux ADV: %w", err)
	}
	if f.Size < 2*advSize {
		return nil, fmt.Errorf("syslinux ADV: %s is only %d bytes", ADVPath, f.Size)
	}
	return f, nil
}

// ReadADV returns the records of the first consistent copy, as ldlinux
// does. With neither copy consistent it returns an empty set and an error.
func (v *Volume) ReadADV() (ADV, error) {
	f, err := v.advFile()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 2*advSize)
	if _, err := f.ReadAt(buf, f.Size-2*advSize); err != nil && err != io.EOF {
		return nil, fmt.Errorf("syslinux ADV: %w", err)
	}
	for i := 0; i < 2; i++ {
		c := buf[i*advSize : (i+1)*advSize]
		if advConsistent(c) {
			return decodeADV(c)
		}
	}
	return ADV{}, errors.New("syslinux ADV: neither copy is consistent")
}

// WriteADV replaces the records: first copy, flush, second copy, flush. A
// cut during either leaves one consistent copy, old or new.
func (v *Volume) WriteADV(a ADV) error {
	f, err := v.advFile()
	if err != nil {
		return err
	}
	b, err := encodeADV(a)
	if err != nil {
		return err
	}
	for i := int64(0); i < 2; i++ {
		if _, err := f.WriteAt(b, f.Size-2*advSize+i*advSize); err != nil {
			return fmt.Errorf("write ADV copy %d: %w", i+1, err)
		}
		if fl, ok := v.dev.(Flusher); ok {
			if err := fl.Sync(); err != nil {
				return fmt.Errorf("flush ADV copy %d: %w", i+1, err)
			}
		}
	}
	return nil
}
