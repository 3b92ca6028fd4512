package config

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
//	uvarint(len(header)) | header (recordHeader as JSON) | body
//
// Database format 3 writes records whose body lists the keys of the
// document's parts (parts.go): 12 bytes a part, about 2 KB at 1000
// tunnels. Format 2 records, whose body is the whole document DEFLATEd,
// are still read: a database from the previous firmware keeps them in its
// history until they are trimmed. Either way every revision holds its
// whole configuration, so any revision can be restored on its own, even
// with its neighbours trimmed.
type recordHeader struct {
	RevisionInfo
	// Body says what follows the header: bodyParts, or "" for a DEFLATE
	// stream of the whole document (format 2).
	Body string `json:"body,omitempty"`
}

const bodyParts = "parts"

// encodeRecord stores the parts of doc that reuse does not have in tx and
// returns the record of revision info holding it.
func encodeRecord(tx *bolt.Tx, info RevisionInfo, doc []byte, reuse partSet) ([]byte, error) {
	info.Schema = SchemaVersion
	keys, err := putParts(tx, info.Revision, doc, reuse)
	if err != nil {
		return nil, fmt.Errorf("encode revision %d: %w", info.Revision, err)
	}
	hdr, err := json.Marshal(recordHeader{RevisionInfo: info, Body: bodyParts})
	if err != nil {
		return nil, fmt.Errorf("encode revision %d: %w", info.Revision, err)
	}
	var n [binary.MaxVarintLen64]byte
	rec := make([]byte, 0, len(n)+len(hdr)+len(keys))
	rec = append(rec, n[:binary.PutUvarint(n[:], uint64(len(hdr)))]...)
	rec = append(rec, hdr...)
	return append(rec, keys...), nil
}

// recordHasParts reports whether a record with header hdr lists parts.
func recordHasParts(hdr []byte) bool {
	var h struct {
		Body string `json:"body"`
	}
	return json.Unmarshal(hdr, &h) == nil && h.Body == bodyParts
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
func decodeRecord(tx *bolt.Tx, rec []byte) (RevisionInfo, *Config, error) {
	info, err := decodeRecordInfo(rec)
	if err != nil {
		return info, nil, err
	}
	hdr, body, _ := splitRecord(rec)
	var js []byte
	if recordHasParts(hdr) {
		js, err = readParts(tx, body)
	} else {
		js, err = inflateAppend(nil, body, MaxDocumentSize+1)
	}
	if err != nil {
		return info, nil, fmt.Errorf("revision %d: %w", info.Revision, err)
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
	return decodeRecord(tx, v)
}
