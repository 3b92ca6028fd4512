package config

import (
	"reflect"
	"sync"
)

// typeWalk is what Clone and normalize need to know of a type, worked out
// once per type: asking reflect about every field of every element (its
// name, whether it is exported, whether it is a text marshaler) was a
// third of an edit of a 1000-tunnel configuration (issue 22).
type typeWalk struct {
	holdsSlices bool  // a slice, or a struct with a slice among its exported fields, at any depth
	fields      []int // of a struct that is not a leaf: the exported fields that hold slices
}

var typeWalks sync.Map // reflect.Type -> *typeWalk

func walkOf(t reflect.Type) *typeWalk {
	if w, ok := typeWalks.Load(t); ok {
		return w.(*typeWalk)
	}
	w := &typeWalk{}
	switch t.Kind() {
	case reflect.Slice:
		w.holdsSlices = true
	case reflect.Struct:
		if isLeaf(t) {
			break
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() && walkOf(f.Type).holdsSlices {
				w.fields = append(w.fields, i)
			}
		}
		w.holdsSlices = len(w.fields) > 0
	}
	typeWalks.Store(t, w)
	return w
}
