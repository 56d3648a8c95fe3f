package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// unknownFields walks decoded YAML against the Go type t and returns the path
// of every key the type does not have, e.g. "registry.adress". encoding/json
// only names the leaf, which leaves users hunting in nested files.
func unknownFields(b []byte, t reflect.Type) ([]string, error) {
	var generic any
	if err := yaml.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	var out []string
	walkUnknown(generic, t, "", &out)
	sort.Strings(out)
	return out, nil
}

func walkUnknown(v any, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct || t == reflect.TypeOf(Duration{}) {
			return
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		for k, sub := range val {
			ft, ok := fields[k]
			p := k
			if path != "" {
				p = path + "." + k
			}
			if !ok {
				*out = append(*out, p)
				continue
			}
			walkUnknown(sub, ft, p, out)
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return
		}
		for i, sub := range val {
			walkUnknown(sub, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}
