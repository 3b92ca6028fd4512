package config

import "reflect"

// The rules that turn the schema's Go types into configuration paths
// (tunnels.branch.remote_address), for tools that walk the schema
// themselves, such as the console's completion. The path parser, the text
// form and the validation use the same rules.

// FieldName is the path segment of a struct field: its JSON name, or ""
// for a field that is not part of the configuration.
func FieldName(f reflect.StructField) string { return jsonName(f) }

// IsNamedList reports whether t is a list whose elements are addressed by
// name (a slice of structs with a string Name field).
func IsNamedList(t reflect.Type) bool { return isNamedList(t) }

// IsLeaf reports whether t is a single value, set with one word.
func IsLeaf(t reflect.Type) bool { return isLeaf(t) }
