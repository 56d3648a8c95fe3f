package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Each setting names the file field it sets, and setting it changes that
// field and no other: the flag, its environment variables and the field
// cannot drift apart, and the generated configuration reference
// (hack/docs) pairs them by it.
func TestSettingsSetTheFieldTheyName(t *testing.T) {
	flags := map[string]bool{}
	for _, s := range Settings() {
		if flags[s.Flag] {
			t.Errorf("flag --%s is in the table twice", s.Flag)
		}
		flags[s.Flag] = true
		if !slices.Contains(fieldPaths(reflect.TypeFor[Lane](), ""), s.Field) {
			t.Errorf("--%s names field %q, which the file has not: %v", s.Flag, s.Field, fieldPaths(reflect.TypeFor[Lane](), ""))
			continue
		}
		l := Default()
		before := leaves(t, l)
		old := before[s.Field]
		var v string
		switch s.Type {
		case "int":
			n, _ := old.(float64)
			v = strconv.Itoa(int(n) + 1)
		case "string":
			v = "set-by-test"
		case "bool":
			b, _ := old.(bool)
			v = strconv.FormatBool(!b)
		case "list":
			v = "a,b"
		case "duration":
			v = "7m"
		default:
			t.Errorf("--%s: type %q has no sample", s.Flag, s.Type)
			continue
		}
		if err := s.set(l, v); err != nil {
			t.Errorf("--%s %s: %v", s.Flag, v, err)
			continue
		}
		after := leaves(t, l)
		var changed []string
		for _, k := range slices.Sorted(maps.Keys(union(before, after))) {
			if fmt.Sprint(after[k]) != fmt.Sprint(before[k]) {
				changed = append(changed, k)
			}
		}
		if !slices.Equal(changed, []string{s.Field}) {
			t.Errorf("--%s %s changed %v, want only %s", s.Flag, v, changed, s.Field)
		}
	}
}

// leaves is l as the file has it, flattened to dotted paths of YAML keys
// (a list is a leaf; a field omitted as empty is absent).
func leaves(t *testing.T, l *Lane) map[string]any {
	t.Helper()
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
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
		out[prefix[:len(prefix)-1]] = v
	}
	walk("", m)
	return out
}

func union(a, b map[string]any) map[string]any {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

// fieldPaths lists the file's fields of struct type t as dotted paths of
// YAML keys, a struct's own fields in place of it (Duration is a value).
func fieldPaths(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[Duration]() {
			out = append(out, fieldPaths(ft, prefix+name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}
