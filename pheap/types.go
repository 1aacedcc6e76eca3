package pheap

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// TypeError says why a Go type cannot live in the heap. It matches
// ErrNotPointerFree with errors.Is.
type TypeError struct {
	Type reflect.Type
	Path string // e.g. ".Items[0].Name"; empty for the type itself
	What string // e.g. "a string"
}

func (e *TypeError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("pheap: type %v is %s", e.Type, e.What)
	}
	return fmt.Sprintf("pheap: type %v: field %s is %s", e.Type, e.Path, e.What)
}

func (e *TypeError) Is(target error) bool { return target == ErrNotPointerFree }

// typeInfo is what the heap needs to know about a Go type.
type typeInfo struct {
	t      reflect.Type
	size   uint64
	fp     uint64 // fingerprint of the layout: kinds, sizes, offsets
	tag    uint32 // block header tag derived from fp
	padded bool   // has padding bytes (not usable as a map key)
	err    error
}

var typeCache sync.Map // reflect.Type -> *typeInfo

func infoOf[T any]() *typeInfo { return infoFor(reflect.TypeFor[T]()) }

func infoFor(t reflect.Type) *typeInfo {
	if ti, ok := typeCache.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := &typeInfo{t: t, size: uint64(t.Size())}
	if what, path := pointerIn(t, ""); what != "" {
		ti.err = &TypeError{Type: t, Path: path, What: what}
	}
	var sb strings.Builder
	ti.padded = layout(&sb, t)
	f := fnv.New64a()
	f.Write([]byte(sb.String()))
	ti.fp = f.Sum64()
	ti.tag = tagOf(ti.fp)
	ti2, _ := typeCache.LoadOrStore(t, ti)
	return ti2.(*typeInfo)
}

// tagOf folds a fingerprint into a block tag; 0 is kept for raw bytes.
func tagOf(fp uint64) uint32 {
	return uint32(fp^fp>>32) | 1
}

// pointerIn finds the first thing in t the garbage collector would have to
// see: the heap is outside the Go heap, so such a value would dangle.
func pointerIn(t reflect.Type, path string) (what, at string) {
	switch t.Kind() {
	case reflect.Pointer:
		return "a pointer", path
	case reflect.Map:
		return "a map", path
	case reflect.Slice:
		return "a slice", path
	case reflect.String:
		return "a string", path
	case reflect.Chan:
		return "a channel", path
	case reflect.Func:
		return "a func", path
	case reflect.Interface:
		return "an interface", path
	case reflect.UnsafePointer:
		return "an unsafe.Pointer", path
	case reflect.Array:
		return pointerIn(t.Elem(), path+"[0]")
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if w, p := pointerIn(f.Type, path+"."+f.Name); w != "" {
				return w, p
			}
		}
	}
	return "", ""
}

// layout writes a description of t's memory layout, without names, so a
// renamed type with the same layout keeps its data; it reports padding.
func layout(sb *strings.Builder, t reflect.Type) (padded bool) {
	switch t.Kind() {
	case reflect.Array:
		sb.WriteString("[" + strconv.Itoa(t.Len()) + "]")
		return layout(sb, t.Elem())
	case reflect.Struct:
		sb.WriteString("{")
		var end uintptr
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Offset != end {
				padded = true
			}
			end = f.Offset + f.Type.Size()
			sb.WriteString(strconv.Itoa(int(f.Offset)) + ":")
			if layout(sb, f.Type) {
				padded = true
			}
			sb.WriteString(";")
		}
		if end != t.Size() {
			padded = true
		}
		sb.WriteString("}" + strconv.Itoa(int(t.Size())))
		return padded
	default:
		sb.WriteString(t.Kind().String())
	}
	return false
}

// CheckType reports whether T can live in the heap: nil, or a *TypeError
// naming the first field that holds a pointer.
func CheckType[T any]() error { return infoOf[T]().err }
