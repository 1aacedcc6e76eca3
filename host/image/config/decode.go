package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// NvbootOnly are the fields only nvboot's schema has: a config that sets
// one is nvboot's, and an unknown key in it is an error.
var NvbootOnly = []string{"KernelPath", "NoBootTrims", "KernelCmdline", "TextStoreMiB", "StateMiB", "Interfaces", "Nameservers", "NTP", "RootFS", "Userland", "Slots", "TestBootDeadline", "Version", "ForwardPort", "Pool", "Checker"}

// Parse decodes and validates a config (nvboot's or a gokrazy instance's)
// and returns the warnings about it: each unknown key, each field set
// that nvboot does not apply (Ignored), and each size the build rounds up
// (Rounded). null where a list or map is
// expected is an empty one. An unknown key is an error only in a config
// that sets one of NvbootOnly.
func Parse(b []byte) (*Config, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, nil, err
	}
	if dec.More() {
		return nil, nil, errors.New("more than one JSON value")
	}
	var unknown []string
	nvboot := false
	walkKeys(b, reflect.TypeFor[Config](), "", func(at, field string, known bool) {
		if !known {
			unknown = append(unknown, at)
		} else if containsFold(NvbootOnly, field) {
			nvboot = true
		}
	})
	if nvboot && len(unknown) > 0 {
		return nil, nil, fmt.Errorf("unknown fields %s (misspelt? this is an nvboot config: it sets nvboot's own fields)", strings.Join(unknown, ", "))
	}
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	var warnings []string
	for _, k := range unknown {
		warnings = append(warnings, k+": unknown field, ignored (as gokrazy ignores it)")
	}
	warnings = append(warnings, c.Ignored()...)
	return &c, append(warnings, c.Rounded()...), nil
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// walkKeys calls f for every object key in the JSON value raw, which is
// decoded into type t: at is the key's path (PackageConfig["x"].WaitFor),
// field the struct field it names and known whether t has one. Keys match
// fields as encoding/json matches them (exact, else case-insensitive).
// Values that do not decode as objects or lists are left alone: the
// decoder has already said what is wrong with them.
func walkKeys(raw []byte, t reflect.Type, at string, f func(at, field string, known bool)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			p := k
			if at != "" {
				p = at + "." + k
			}
			sf, ok := fields[k]
			if !ok {
				for name, s := range fields {
					if strings.EqualFold(name, k) {
						sf, ok = s, true
						break
					}
				}
			}
			if !ok {
				f(p, "", false)
				continue
			}
			f(p, sf.Name, true)
			walkKeys(m[k], sf.Type, p, f)
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		for _, k := range sortedKeys(m) {
			walkKeys(m[k], t.Elem(), fmt.Sprintf("%s[%q]", at, k), f)
		}
	case reflect.Slice:
		var l []json.RawMessage
		if json.Unmarshal(raw, &l) != nil {
			return
		}
		for i, v := range l {
			walkKeys(v, t.Elem(), fmt.Sprintf("%s[%d]", at, i), f)
		}
	}
}

// jsonFields are t's fields by their JSON name, the fields of embedded
// structs promoted as encoding/json promotes them.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			for n, s := range jsonFields(sf.Type) {
				out[n] = s
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out[name] = sf
	}
	return out
}
