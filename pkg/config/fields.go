package config

import (
	"encoding/json"
	"reflect"
	"strings"
)

// Field is one leaf of the config file.
type Field struct {
	Path   string       // its YAML keys, dotted: registry.enabled
	Struct string       // the Go struct that declares it: Registry
	Name   string       // its Go name there: Enabled
	Type   reflect.Type // pointers dereferenced
}

// Fields lists the file's leaves in declaration order: a struct field's
// own fields stand in its place, and a Duration is a value. The settings
// name theirs by Path; the generated configuration reference lists them.
func Fields() []Field { return fieldsOf(reflect.TypeFor[Lane](), "") }

func fieldsOf(t reflect.Type, prefix string) []Field {
	var out []Field
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[Duration]() {
			out = append(out, fieldsOf(ft, prefix+name+".")...)
			continue
		}
		out = append(out, Field{Path: prefix + name, Struct: t.Name(), Name: f.Name, Type: ft})
	}
	return out
}

// Values is l as its file has it, by Field.Path, each value as JSON
// decodes it; a field omitted as empty is absent.
func Values(l *Lane) (map[string]any, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if sub, ok := v.(map[string]any); ok {
			for k, x := range sub {
				walk(prefix+k+".", x)
			}
			return
		}
		out[strings.TrimSuffix(prefix, ".")] = v
	}
	walk("", m)
	return out, nil
}
