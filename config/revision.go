package config

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"
)

// RevisionInfo describes one commit in the history.
type RevisionInfo struct {
	Revision uint64    `json:"revision"`
	Who      string    `json:"who"`
	When     time.Time `json:"when"`
	Message  string    `json:"message"`
	Sections []Section `json:"sections"` // sections changed from the previous running config
	Reason   string    `json:"reason"`   // commit, commit-confirmed, rollback, confirm-timeout, factory-reset, migration
	Schema   int       `json:"schema"`   // schema version of the stored config
}

// A revision record is
//
//	uvarint(len(header)) | header (RevisionInfo as JSON) | DEFLATE(config JSON)
//
// Every revision holds its whole config, so any revision can be restored on
// its own, even with its neighbours trimmed. Compressed, a 50-tunnel config
// takes a few KiB: one commit writes about two pages of record.
func encodeRecord(info RevisionInfo, cfg *Config) ([]byte, error) {
	info.Schema = SchemaVersion
	hdr, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("encode revision %d: %w", info.Revision, err)
	}
	var buf bytes.Buffer
	var n [binary.MaxVarintLen64]byte
	buf.Write(n[:binary.PutUvarint(n[:], uint64(len(hdr)))])
	buf.Write(hdr)
	zw, err := flate.NewWriter(&buf, flate.BestCompression)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode revision %d: %w", info.Revision, err)
	}
	if _, err := zw.Write(body); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func splitRecord(rec []byte) (hdr, body []byte, err error) {
	l, n := binary.Uvarint(rec)
	if n <= 0 || l > uint64(len(rec)-n) {
		return nil, nil, errors.New("truncated revision record")
	}
	return rec[n : n+int(l)], rec[n+int(l):], nil
}

func decodeRecordInfo(rec []byte) (RevisionInfo, error) {
	var info RevisionInfo
	hdr, _, err := splitRecord(rec)
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(hdr, &info); err != nil {
		return info, fmt.Errorf("revision header: %w", err)
	}
	return info, nil
}

// decodeRecord returns the revision's info and config, migrating a config
// stored by an older schema.
func decodeRecord(rec []byte) (RevisionInfo, *Config, error) {
	info, err := decodeRecordInfo(rec)
	if err != nil {
		return info, nil, err
	}
	_, body, _ := splitRecord(rec)
	zr := flate.NewReader(bytes.NewReader(body))
	js, err := io.ReadAll(io.LimitReader(zr, MaxDocumentSize+1))
	if err != nil {
		return info, nil, fmt.Errorf("revision %d: decompress: %w", info.Revision, err)
	}
	if len(js) > MaxDocumentSize {
		return info, nil, fmt.Errorf("revision %d: config larger than %d bytes", info.Revision, MaxDocumentSize)
	}
	cfg, err := decodeVersioned(js, info.Schema)
	if err != nil {
		return info, nil, fmt.Errorf("revision %d: %w", info.Revision, err)
	}
	return info, cfg, nil
}

// decodeVersioned decodes a config JSON document of the given schema.
func decodeVersioned(js []byte, schema int) (*Config, error) {
	if schema == SchemaVersion {
		return Decode(js)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("schema %d config: %w", schema, err)
	}
	if err := MigrateDocument(doc, schema); err != nil {
		return nil, err
	}
	migrated, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return Decode(migrated)
}

func readRecord(tx *bolt.Tx, rev uint64) (RevisionInfo, *Config, error) {
	v := tx.Bucket(bucketRevisions).Get(revKey(rev))
	if v == nil {
		return RevisionInfo{}, nil, fmt.Errorf("revision %d: %w", rev, ErrNoRevision)
	}
	return decodeRecord(v)
}
