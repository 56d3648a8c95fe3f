package main

import (
	"reflect"
	"testing"
)

// Cases follow what k3s's GetArgs (k3s-io/k3s pkg/util/args.go@v1.35.5+k3s1)
// does with each kind of item.
func TestComponentArgsMergesAsK3sGetArgs(t *testing.T) {
	defaults := map[string]string{"a": "d", "b": "x", "feature-gates": "F=true"}
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"defaults sorted", nil, []string{"--a=d", "--b=x", "--feature-gates=F=true"}},
		{"replace, leading dashes optional", []string{"--a=1", "b=2"}, []string{"--a=1", "--b=2", "--feature-gates=F=true"}},
		{"bare key is true", []string{"c"}, []string{"--a=d", "--b=x", "--c=true", "--feature-gates=F=true"}},
		{"repeated key repeats the flag in order, default dropped", []string{"a=1", "a=2"}, []string{"--a=1", "--a=2", "--b=x", "--feature-gates=F=true"}},
		{"+ appends after the default", []string{"feature-gates+=G=true"}, []string{"--a=d", "--b=x", "--feature-gates=F=true", "--feature-gates=G=true"}},
		{"- prepends before the default", []string{"feature-gates-=G=true"}, []string{"--a=d", "--b=x", "--feature-gates=G=true", "--feature-gates=F=true"}},
		{"+ after a replacement keeps the replacement", []string{"a=1", "a+=2"}, []string{"--a=1", "--a=2", "--b=x", "--feature-gates=F=true"}},
		{"- after items goes first", []string{"a+=1", "a-=0"}, []string{"--a=0", "--a=d", "--a=1", "--b=x", "--feature-gates=F=true"}},
		{"+ without a default", []string{"z+=1"}, []string{"--a=d", "--b=x", "--feature-gates=F=true", "--z=1"}},
		{"only one -- is dropped", []string{"---odd=1"}, []string{"---odd=1", "--a=d", "--b=x", "--feature-gates=F=true"}},
		{"value keeps its =", []string{"kube-reserved=cpu=500m"}, []string{"--a=d", "--b=x", "--feature-gates=F=true", "--kube-reserved=cpu=500m"}},
	} {
		got := componentArgs(defaults, tc.extra)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: componentArgs(%v) =\n%q\nwant\n%q", tc.name, tc.extra, got, tc.want)
		}
	}
	if defaults["a"] != "d" || len(defaults) != 3 {
		t.Errorf("defaults changed: %v", defaults)
	}
}
