package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
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
		if !slices.ContainsFunc(Fields(), func(f Field) bool { return f.Path == s.Field }) {
			t.Errorf("--%s names field %q, which the file has not", s.Flag, s.Field)
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
		keys := maps.Clone(before)
		maps.Copy(keys, after)
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if fmt.Sprint(after[k]) != fmt.Sprint(before[k]) {
				changed = append(changed, k)
			}
		}
		if !slices.Equal(changed, []string{s.Field}) {
			t.Errorf("--%s %s changed %v, want only %s", s.Flag, v, changed, s.Field)
		}
	}
}

func leaves(t *testing.T, l *Lane) map[string]any {
	t.Helper()
	v, err := Values(l)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
