package controller

import (
	"reflect"
	"time"
)

// What an object costs in the cache is its Go memory, not its encoding: an
// empty map entry with a 3-byte key is about 9 bytes in protobuf and 50–90
// in a Go map (slot, string headers, the key's allocation). So the cache's
// caps compare heldBytes, an estimate of the memory an object holds: every
// value's own size, plus for each string, slice, map and pointer what it
// points to and a fixed overhead for the allocation.
const (
	heldPerAllocation = 16 // allocator rounding and a header's share
	heldMapHeader     = 48 // a map's own header (internal/runtime/maps.Map)
	heldGroupSlots    = 8  // slots of a map group, each with one control byte
)

// heldBytes estimates the memory obj holds, stopping once it is over limit
// (the caps only ask whether it is).
func heldBytes(obj any, limit int) int {
	v := reflect.ValueOf(obj)
	n := int(v.Type().Size())
	heldIndirect(v, &n, limit)
	return n
}

// timeType is not walked into: its *time.Location is shared (time.Local,
// initialized lazily), not the object's, and reading it races.
var timeType = reflect.TypeFor[time.Time]()

// heldIndirect adds to *n what v points to (v's own size is counted by its
// container).
func heldIndirect(v reflect.Value, n *int, limit int) {
	if *n > limit || v.Type() == timeType {
		return
	}
	switch v.Kind() {
	case reflect.String:
		if v.Len() > 0 {
			*n += v.Len() + heldPerAllocation
		}
	case reflect.Pointer:
		if !v.IsNil() {
			*n += int(v.Type().Elem().Size()) + heldPerAllocation
			heldIndirect(v.Elem(), n, limit)
		}
	case reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			*n += int(e.Type().Size()) + heldPerAllocation
			heldIndirect(e, n, limit)
		}
	case reflect.Slice:
		if v.Cap() > 0 {
			*n += v.Cap()*int(v.Type().Elem().Size()) + heldPerAllocation
		}
		for i := 0; i < v.Len() && *n <= limit; i++ {
			heldIndirect(v.Index(i), n, limit)
		}
	case reflect.Array:
		for i := 0; i < v.Len() && *n <= limit; i++ {
			heldIndirect(v.Index(i), n, limit)
		}
	case reflect.Map:
		heldMap(v, n, limit)
	case reflect.Struct:
		for i := 0; i < v.NumField() && *n <= limit; i++ {
			heldIndirect(v.Field(i), n, limit)
		}
	}
}

// heldMap adds a map: its header, its groups of slots, and what the keys
// and values point to. A Go map (swiss table) keeps its entries in groups
// of eight slots of key and value with eight control bytes, and grows to
// the next power of two once seven eighths are used: a map of one entry
// takes a whole group (288 bytes for map[string]string), which charging
// per entry undercounted about 2x for objects of many small maps
// (selectors of one label, resource lists of one entry).
func heldMap(v reflect.Value, n *int, limit int) {
	if v.IsNil() {
		return
	}
	slot := int(v.Type().Key().Size() + v.Type().Elem().Size())
	*n += heldMapHeader + heldPerAllocation + heldMapGroups(v.Len())*(heldGroupSlots+heldGroupSlots*slot) + heldPerAllocation
	for it := v.MapRange(); it.Next() && *n <= limit; {
		heldIndirect(it.Key(), n, limit)
		heldIndirect(it.Value(), n, limit)
	}
}

// heldMapGroups is how many groups of slots a map of entries holds: one
// for up to eight, else the power-of-two capacity that keeps it at most
// seven eighths full.
func heldMapGroups(entries int) int {
	if entries <= heldGroupSlots {
		return 1
	}
	capacity := heldGroupSlots
	for capacity*7/8 < entries {
		capacity *= 2
	}
	return capacity / heldGroupSlots
}
