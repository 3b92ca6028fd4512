package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
)

// MaxDocumentSize bounds every configuration document the package decodes
// (imports, patches, API bodies). A 50-tunnel config is about 40 KB.
const MaxDocumentSize = 1 << 20

// Decode parses a configuration in its JSON form strictly: unknown fields,
// trailing data and documents over MaxDocumentSize are refused. Malformed
// values inside well-formed JSON (a bad network, say) are kept and left to
// Validate, which names their paths. The result is normalized (empty lists
// are [] rather than null).
func Decode(data []byte) (*Config, error) {
	if len(data) > MaxDocumentSize {
		return nil, fmt.Errorf("configuration is %d bytes, more than the %d allowed", len(data), MaxDocumentSize)
	}
	var c Config
	if err := decodeStrict(data, &c); err != nil {
		return nil, err
	}
	c.normalize()
	return &c, nil
}

func decodeStrict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return describeJSONError(data, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("invalid JSON: data after the end of the document")
	}
	return nil
}

// describeJSONError turns encoding/json's errors into what a user can act
// on: the field and the line.
func describeJSONError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line := 1 + bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("invalid JSON at line %d: %v", line, syn)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Errorf("%s: expected %s, got JSON %s", typ.Field, jsonKind(typ.Type), typ.Value)
		}
		return fmt.Errorf("expected %s, got JSON %s", jsonKind(typ.Type), typ.Value)
	case errors.Is(err, io.EOF):
		return errors.New("invalid JSON: empty document")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: the document is cut short")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// jsonKind names what JSON a Go type wants, for error messages.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		return "a JSON list"
	case reflect.String:
		return "a JSON string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	}
	return t.String()
}

// JSON returns c as indented JSON with secrets in the clear: it is the
// form stored and served to the services. Use Text for people.
func (c *Config) JSON() []byte {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("config: marshal: %v", err)) // plain data: cannot fail
	}
	return b
}

// normalize replaces nil slices with empty ones everywhere, so that the
// JSON form has [] rather than null and equal configs encode equally.
// An unset ike_version (left out of the JSON when it is the default)
// becomes 2.
func (c *Config) normalize() {
	normalizeValue(reflect.ValueOf(c).Elem())
	for i := range c.Tunnels {
		c.Tunnels[i].IKEVersion = c.Tunnels[i].IKEVersion.Or2()
	}
}

func normalizeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for _, i := range walkOf(v.Type()).fields { // none in a leaf
			normalizeValue(v.Field(i))
		}
	case reflect.Slice:
		if v.IsNil() {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		}
		if walkOf(v.Type().Elem()).holdsSlices {
			for i := 0; i < v.Len(); i++ {
				normalizeValue(v.Index(i))
			}
		}
	}
}

// MergePatch applies an RFC 7396 JSON merge patch to c and returns the
// result; c is not changed. Lists are replaced whole, as the RFC says.
func (c *Config) MergePatch(patch []byte) (*Config, error) {
	if len(patch) > MaxDocumentSize {
		return nil, fmt.Errorf("patch is %d bytes, more than the %d allowed", len(patch), MaxDocumentSize)
	}
	var p any
	if err := decodeStrict(patch, &p); err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	var doc any
	if err := json.Unmarshal(c.JSON(), &doc); err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	merged, err := json.Marshal(mergePatch(doc, p))
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	out, err := Decode(merged)
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	return out, nil
}

func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = mergePatch(tm[k], v)
	}
	return tm
}
