package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestTrimSpecsKeepsOnlyBoundingSetCapabilities(t *testing.T) {
	allowed, err := boundingSet()
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]string{}, capNames...), "CAP_FROM_THE_FUTURE")
	var want []string
	for _, c := range all {
		if allowed[c] {
			want = append(want, c)
		}
	}
	caps := map[string][]string{"bounding": all, "effective": all, "inheritable": all, "permitted": all, "ambient": all}

	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	if err := os.Mkdir(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(bundle, "config.json"), map[string]any{
		"ociVersion": "1.0.2",
		"process":    map[string]any{"args": []string{"sh"}, "capabilities": caps},
		"hostname":   "kept",
	})
	process := filepath.Join(dir, "process.json")
	writeJSON(t, process, map[string]any{"args": []string{"id"}, "capabilities": caps})

	if err := trimSpecs([]string{"--root", "/run/x", "create", "--bundle", bundle, "id1"}); err != nil {
		t.Fatal(err)
	}
	if err := trimSpecs([]string{"exec", "--process=" + process, "id1"}); err != nil {
		t.Fatal(err)
	}

	var cfg struct {
		Hostname string `json:"hostname"`
		Process  struct {
			Args         []string            `json:"args"`
			Capabilities map[string][]string `json:"capabilities"`
		} `json:"process"`
	}
	readJSON(t, filepath.Join(bundle, "config.json"), &cfg)
	if cfg.Hostname != "kept" || !reflect.DeepEqual(cfg.Process.Args, []string{"sh"}) {
		t.Errorf("unrelated fields changed: %+v", cfg)
	}
	var proc struct {
		Capabilities map[string][]string `json:"capabilities"`
	}
	readJSON(t, process, &proc)
	for name, got := range map[string]map[string][]string{"bundle": cfg.Process.Capabilities, "process": proc.Capabilities} {
		for kind, list := range got {
			if !reflect.DeepEqual(list, want) {
				t.Errorf("%s %s = %v, want %v", name, kind, list, want)
			}
		}
		if len(got) != 5 {
			t.Errorf("%s: %d capability lists, want 5", name, len(got))
		}
	}
}

func TestTrimSpecsLeavesOtherCommandsAlone(t *testing.T) {
	if err := trimSpecs([]string{"state", "id1"}); err != nil {
		t.Fatal(err)
	}
	if err := trimSpecs([]string{"create", "--bundle", filepath.Join(t.TempDir(), "missing"), "id"}); err == nil {
		t.Fatal("a missing bundle config must be an error, not a silent pass")
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}
