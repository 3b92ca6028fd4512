package config

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Schema 1 databases had a single bucket "config" holding the version and
// the current config, without history:
//
//	config  version  "1"
//	        current  config JSON of schema 1
//
// migrateV1 rewrites such a file to the current layout in one transaction:
// the old config, migrated, becomes revision 1.
var (
	bucketV1     = []byte("config")
	keyV1Version = []byte("version")
	keyV1Current = []byte("current")
)

func (s *Store) migrateV1() error {
	return s.update(func(tx *bolt.Tx) error {
		old := tx.Bucket(bucketV1)
		var doc map[string]any
		if err := json.Unmarshal(old.Get(keyV1Current), &doc); err != nil {
			return fmt.Errorf("schema 1 config: %w", err)
		}
		if err := MigrateDocument(doc, 1); err != nil {
			return err
		}
		js, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		cfg, err := Decode(js)
		if err != nil {
			return fmt.Errorf("schema 1 config after migration: %w", err)
		}
		if err := tx.DeleteBucket(bucketV1); err != nil {
			return err
		}
		meta, err := createLayout(tx)
		if err != nil {
			return err
		}
		stored, err := encodeDocument(cfg)
		if err != nil {
			return err
		}
		info := RevisionInfo{Revision: 1, Who: "flashgate", When: s.opts.Clock.Now().UTC(),
			Message: "migrated from schema 1", Sections: Sections, Reason: "migration"}
		s.opts.Logf("config: migrated %s from schema 1 to %d", s.path, SchemaVersion)
		return s.writeRevision(tx, meta, info, stored)
	})
}
