package config

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	bolt "go.etcd.io/bbolt"
)

// Since database format 3 a revision does not hold its configuration
// document itself: the document is cut into parts, each stored once in the
// parts bucket, and the revision lists the keys of its parts in order. A
// commit stores only the parts that the revision it replaces does not
// have (for a small change, one or two) and a record listing them all; the
// unchanged parts are shared. Before (issue 22), every commit wrote the
// whole document, and bbolt rewrote the leaf holding it with its
// neighbours: 243 KB per commit at 1000 tunnels.
//
//	parts   <revision that stored it, 8 bytes | number, 4 bytes> ->
//	        SHA-256 of the part (32 bytes) | DEFLATE(part)
//
// Keys grow with the revision, so a commit's new parts go at the end of
// the bucket, into one leaf page, and the parts a trim frees are mostly
// neighbours. Parts no revision lists any more are deleted when the
// history is trimmed (collectParts), in the same transaction.
var bucketParts = []byte("parts")

// The document is cut where its content says, not at fixed offsets
// (content-defined chunking, as backup tools do): a cut depends only on the
// partWindow bytes before it, so an edit, even one that changes the length
// of a value, moves no cut outside the part it falls in and the next one or
// two. The window is long enough to hold something of every list element
// that is its own (a tunnel's name, address or key): over a 64-byte window
// the identical stretches between a thousand tunnels offered a cut at every
// tunnel, and cuts that partMin spaced out then followed each other's phase
// instead of the content. Parts are partMin to partMax bytes, about partMin
// + 2 KiB on average: a 1000-tunnel document (427 KB) is 100 to 150 parts,
// each about 1 KB deflated, four or so to a bbolt page.
const (
	partMin    = 1 << 10
	partBits   = 11 // a cut where the hash's top 11 bits are zero: 1 in 2048 bytes
	partMax    = 16 << 10
	partWindow = 512
)

// gear holds 256 fixed pseudo-random words (SplitMix64 from 0).
// Changing them only changes where future documents are cut, never how a
// stored one is read: a revision names its parts.
var gear = func() (t [256]uint64) {
	x := uint64(0)
	for i := range t {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		t[i] = z ^ (z >> 31)
	}
	return t
}()

// partLen returns the length of the part that doc starts with. The hash is
// a cyclic polynomial (buzhash) over the last partWindow bytes.
func partLen(doc []byte) int {
	if len(doc) <= partMin {
		return len(doc)
	}
	end := min(len(doc), partMax)
	var h uint64
	for i := partMin - partWindow; i < partMin; i++ {
		h = bits.RotateLeft64(h, 1) ^ gear[doc[i]]
	}
	for i := partMin; i < end; i++ {
		h = bits.RotateLeft64(h, 1) ^ bits.RotateLeft64(gear[doc[i-partWindow]], partWindow%64) ^ gear[doc[i]]
		if h>>(64-partBits) == 0 {
			return i + 1
		}
	}
	return end
}

// splitParts cuts doc into parts (sub-slices of doc).
func splitParts(doc []byte) [][]byte {
	var parts [][]byte
	for len(doc) > 0 {
		n := partLen(doc)
		parts = append(parts, doc[:n])
		doc = doc[n:]
	}
	return parts
}

const partKeyLen = 8 + 4

// partSet maps the hashes of stored parts to their keys.
type partSet map[[sha256.Size]byte][]byte

// addPartsOf adds the parts of revision rev to set, if it has any.
func addPartsOf(tx *bolt.Tx, set partSet, rev uint64) {
	rec := tx.Bucket(bucketRevisions).Get(revKey(rev))
	if rec == nil {
		return
	}
	hdr, keys, err := splitRecord(rec)
	if err != nil || !recordHasParts(hdr) {
		return
	}
	b := tx.Bucket(bucketParts)
	for i := 0; i+partKeyLen <= len(keys); i += partKeyLen {
		k := keys[i : i+partKeyLen]
		if v := b.Get(k); len(v) >= sha256.Size {
			set[[sha256.Size]byte(v)] = bytes.Clone(k)
		}
	}
}

// putParts stores the parts of doc that are not in reuse as parts of
// revision rev and returns the keys of all of them, concatenated in order.
func putParts(tx *bolt.Tx, rev uint64, doc []byte, reuse partSet) ([]byte, error) {
	b := tx.Bucket(bucketParts)
	// Appended in key order: full leaves split where they end.
	b.FillPercent = 0.9
	var keys []byte
	seq := uint32(0)
	for _, p := range splitParts(doc) {
		sum := sha256.Sum256(p)
		if k, ok := reuse[sum]; ok {
			keys = append(keys, k...)
			continue
		}
		k := make([]byte, partKeyLen)
		binary.BigEndian.PutUint64(k, rev)
		binary.BigEndian.PutUint32(k[8:], seq)
		seq++
		v := append(make([]byte, 0, sha256.Size+len(p)/2), sum[:]...)
		v, err := deflateAppend(v, p)
		if err != nil {
			return nil, err
		}
		if err := b.Put(k, v); err != nil {
			return nil, fmt.Errorf("store a part of the configuration: %w", err)
		}
		reuse[sum] = k
		keys = append(keys, k...)
	}
	return keys, nil
}

// deflateAppend appends p compressed to dst.
func deflateAppend(dst, p []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	zw, err := flate.NewWriter(buf, flate.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(p); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readParts reassembles the document whose part keys are keys, checking
// every part against the hash stored with it: bbolt has no checksums of its own, and a
// damaged part must fail the read (and so set the database aside at open)
// rather than hand out a configuration with a changed key or address.
func readParts(tx *bolt.Tx, keys []byte) ([]byte, error) {
	if len(keys)%partKeyLen != 0 {
		return nil, errors.New("truncated list of parts")
	}
	b := tx.Bucket(bucketParts)
	if b == nil {
		return nil, errors.New("the revision lists parts but the database has no parts bucket")
	}
	var doc []byte
	for i := 0; i < len(keys); i += partKeyLen {
		key := keys[i : i+partKeyLen]
		v := b.Get(key)
		if len(v) < sha256.Size {
			return nil, fmt.Errorf("part %x is missing", key)
		}
		start := len(doc)
		var err error
		doc, err = inflateAppend(doc, v[sha256.Size:], MaxDocumentSize+1-len(doc))
		if err != nil {
			return nil, fmt.Errorf("part %x: %w", key, err)
		}
		if len(doc) > MaxDocumentSize {
			return nil, fmt.Errorf("config larger than %d bytes", MaxDocumentSize)
		}
		if sum := sha256.Sum256(doc[start:]); !bytes.Equal(sum[:], v[:sha256.Size]) {
			return nil, fmt.Errorf("part %x is damaged (its content does not match its hash)", key)
		}
	}
	return doc, nil
}

// inflateAppend appends to dst what z inflates to, reading at most limit
// bytes of it.
func inflateAppend(dst, z []byte, limit int) ([]byte, error) {
	zr := flate.NewReader(bytes.NewReader(z))
	defer zr.Close()
	buf := bytes.NewBuffer(dst)
	if _, err := buf.ReadFrom(io.LimitReader(zr, int64(max(limit, 0)))); err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	return buf.Bytes(), nil
}

// collectParts deletes the parts that no revision lists.
func collectParts(tx *bolt.Tx) error {
	parts := tx.Bucket(bucketParts)
	used := map[[partKeyLen]byte]bool{}
	err := tx.Bucket(bucketRevisions).ForEach(func(k, v []byte) error {
		hdr, body, err := splitRecord(v)
		if err != nil {
			return fmt.Errorf("revision %x: %w", k, err)
		}
		if !recordHasParts(hdr) {
			return nil
		}
		for i := 0; i+partKeyLen <= len(body); i += partKeyLen {
			used[[partKeyLen]byte(body[i:i+partKeyLen])] = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("collect unused parts: %w", err)
	}
	var unused [][]byte
	parts.ForEach(func(k, _ []byte) error {
		if len(k) != partKeyLen || !used[[partKeyLen]byte(k)] {
			unused = append(unused, bytes.Clone(k))
		}
		return nil
	})
	for _, k := range unused {
		if err := parts.Delete(k); err != nil {
			return fmt.Errorf("delete an unused part: %w", err)
		}
	}
	return nil
}
