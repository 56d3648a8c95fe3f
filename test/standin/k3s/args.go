package main

import (
	"sort"
	"strings"
)

// componentArgs merges k3s's defaults for a component with the user's
// --<component>-arg items as k3s's GetArgs does (k3s-io/k3s
// pkg/util/args.go@v1.35.5+k3s1):
//
//   - an item is "key=value" or a bare "key" (value "true"), with one
//     leading "--" dropped if present;
//   - "key=value" replaces the default of key, and a repeated key gives the
//     flag once per item, in order;
//   - "key+=value" appends value after the default (and the items of key
//     before it), "key-=value" puts it before them: the flag is then
//     repeated, once per value;
//   - the result is "--key=value", sorted by key, a key's values in order.
func componentArgs(defaults map[string]string, extra []string) []string {
	initial := make(map[string]string, len(defaults))
	for k, v := range defaults {
		initial[k] = v
	}
	values := map[string][]string{}
	for _, item := range extra {
		key, value, found := strings.Cut(strings.TrimPrefix(item, "--"), "=")
		if !found {
			value = "true"
		}
		name := strings.TrimRight(key, "+-")
		def, hasDefault := initial[name]
		before := values[name]
		var next []string
		switch {
		case strings.HasSuffix(key, "+"):
			if hasDefault {
				next = append(next, def)
			}
			next = append(append(next, before...), value)
		case strings.HasSuffix(key, "-"):
			next = append(next, value)
			if hasDefault {
				next = append(next, def)
			}
			next = append(next, before...)
		default:
			next = append(append(next, before...), value)
		}
		// Once an item names a key, the default is folded in (or dropped)
		// and later items of that key see only what is in values.
		delete(initial, name)
		values[name] = next
	}
	for k, v := range initial {
		values[k] = []string{v}
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		for _, v := range values[k] {
			out = append(out, "--"+strings.TrimPrefix(k, "--")+"="+v)
		}
	}
	return out
}
