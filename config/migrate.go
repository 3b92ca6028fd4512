package config

import (
	"fmt"
	"sort"
)

// SchemaVersion is the version of the configuration's JSON shape that this
// firmware writes. Every change of shape bumps it and adds a step to
// docMigrations, so that an older database or backup still loads.
//
// History:
//
//	1  tunnels were an object keyed by name; a tunnel had "peer" instead of
//	   "remote_address", and one "local_subnet" and "remote_subnet".
//	2  tunnels are a list of named entries with remote_address and lists of
//	   subnets; tunnels gained data_plane.
//
// Not every addition is a new shape. interfaces gained an optional
// dhcp_server block within version 2: it is left out of the JSON when
// empty, and its absence means what version 2 always meant (a LAN with a
// static IPv4 address serves its automatic pool), so every version 2
// document reads the same as before and needs no step; a document that
// uses the block is refused by older firmware as an unknown field. A bump
// would instead have made every card unreadable to the firmware in the
// other boot slot.
//
// tunnels gained ike_version and legacy_algorithms the same way within
// version 2: both are left out of the JSON at their defaults (IKEv2, no
// legacy algorithms), a document without them decodes to those defaults,
// and only a configuration that uses IKEv1 or legacy algorithms (which
// older firmware could not run anyway) is refused by older firmware.
const SchemaVersion = 2

// docMigrations[v] turns a version v document into version v+1. It works on
// the generic JSON tree so that it does not depend on the Go types of any
// version.
var docMigrations = map[int]func(doc map[string]any) error{
	1: migrate1to2,
}

// MigrateDocument upgrades a decoded JSON configuration of schema version
// from to SchemaVersion in place.
func MigrateDocument(doc map[string]any, from int) error {
	if from > SchemaVersion {
		return fmt.Errorf("schema version %d is newer than this firmware's (%d)", from, SchemaVersion)
	}
	if from < 1 {
		return fmt.Errorf("schema version %d does not exist", from)
	}
	for v := from; v < SchemaVersion; v++ {
		if err := docMigrations[v](doc); err != nil {
			return fmt.Errorf("migrate schema %d to %d: %w", v, v+1, err)
		}
	}
	return nil
}

func migrate1to2(doc map[string]any) error {
	raw, ok := doc["tunnels"]
	if !ok || raw == nil {
		doc["tunnels"] = []any{}
		return nil
	}
	byName, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("tunnels: expected an object keyed by name, got %T", raw)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names) // v1 had no order; name order is stable
	list := make([]any, 0, len(names))
	for _, n := range names {
		t, ok := byName[n].(map[string]any)
		if !ok {
			return fmt.Errorf("tunnels.%s: expected an object, got %T", n, byName[n])
		}
		t["name"] = n
		if peer, ok := t["peer"]; ok {
			t["remote_address"] = peer
			delete(t, "peer")
		}
		for _, side := range []string{"local", "remote"} {
			old := side + "_subnet"
			if s, ok := t[old]; ok {
				if s == nil || s == "" {
					t[side+"_subnets"] = []any{}
				} else {
					t[side+"_subnets"] = []any{s}
				}
				delete(t, old)
			}
		}
		if _, ok := t["data_plane"]; !ok {
			t["data_plane"] = DataPlaneAuto
		}
		list = append(list, t)
	}
	doc["tunnels"] = list
	return nil
}
