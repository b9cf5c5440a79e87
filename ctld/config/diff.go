package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Diff lists the settings that differ between old and new, each under
// its key as written in tide.yaml, in the order of Config's fields. A
// list of named entries (partitions, queues, qos, topology switches) is
// compared entry by entry, keyed by name ("partitions[gpu].max_time"),
// so that reordering it changes nothing; an entry on one side only is
// one change whose other side is "(none)". Other lists (operators,
// nodes) are compared whole.
func Diff(old, new Config) []api.ConfigChange {
	var out []api.ConfigChange
	diffValue("", reflect.ValueOf(old), reflect.ValueOf(new), &out)
	return out
}

// diffValue appends the differences of a and b (of one type) under key.
func diffValue(key string, a, b reflect.Value, out *[]api.ConfigChange) {
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			diffValue(joinKey(key, name), a.Field(i), b.Field(i), out)
		}
	case reflect.Slice:
		if nameField(a.Type().Elem()) >= 0 {
			diffNamed(key, a, b, out)
			return
		}
		fallthrough
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, api.ConfigChange{Key: key, Old: formatValue(a), New: formatValue(b)})
		}
	}
}

// diffNamed compares two lists of named entries entry by entry.
func diffNamed(key string, a, b reflect.Value, out *[]api.ConfigChange) {
	idx := nameField(a.Type().Elem())
	byName := func(v reflect.Value) (map[string]reflect.Value, []string) {
		m := map[string]reflect.Value{}
		var order []string
		for i := range v.Len() {
			n := v.Index(i).Field(idx).String()
			if _, dup := m[n]; !dup {
				order = append(order, n)
			}
			m[n] = v.Index(i)
		}
		return m, order
	}
	am, aOrder := byName(a)
	bm, bOrder := byName(b)
	for _, n := range aOrder {
		k := fmt.Sprintf("%s[%s]", key, n)
		if bv, ok := bm[n]; ok {
			diffValue(k, am[n], bv, out)
		} else {
			*out = append(*out, api.ConfigChange{Key: k, Old: formatValue(am[n]), New: "(none)"})
		}
	}
	for _, n := range bOrder {
		if _, ok := am[n]; !ok {
			*out = append(*out, api.ConfigChange{Key: fmt.Sprintf("%s[%s]", key, n), Old: "(none)", New: formatValue(bm[n])})
		}
	}
}

// nameField is the index of the field tagged name in struct type t, or
// -1 when t is not a struct with a string name.
func nameField(t reflect.Type) int {
	if t.Kind() != reflect.Struct {
		return -1
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ","); name == "name" && f.Type.Kind() == reflect.String {
			return i
		}
	}
	return -1
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// formatValue writes a setting as a log line or an answer shows it:
// durations as "30s", lists comma-separated, an unset optional value as
// "(unset)", a whole entry as its JSON.
func formatValue(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "(unset)"
		}
		v = v.Elem()
	}
	if d, ok := v.Interface().(time.Duration); ok {
		return d.String()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64, reflect.Int32:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float64, reflect.Float32:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			return strings.Join(v.Interface().([]string), ",")
		}
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return string(b)
}
