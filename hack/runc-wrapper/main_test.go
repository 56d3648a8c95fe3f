package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
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

// Rootful Podman asks runc for RLIMIT_NOFILE and RLIMIT_NPROC of 1048576
// (containers/podman pkg/specgen/generate/oci.go addRlimits@v4.3.1);
// without CAP_SYS_RESOURCE runc cannot raise a limit past its own hard one.
func TestTrimRlimitsLowersToOwnHardLimit(t *testing.T) {
	var nofile, core syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_CORE, &core); err != nil {
		t.Fatal(err)
	}
	if nofile.Max >= 1<<62 {
		t.Fatalf("RLIMIT_NOFILE hard limit %d: nothing to lower", nofile.Max)
	}
	proc := map[string]json.RawMessage{}
	limits := []map[string]any{
		{"type": "RLIMIT_NOFILE", "hard": uint64(1 << 62), "soft": uint64(1 << 62)},
		{"type": "RLIMIT_CORE", "hard": uint64(0), "soft": uint64(0)},
	}
	proc["rlimits"], _ = json.Marshal(limits)
	changed, err := trimRlimits(proc)
	if err != nil || !changed {
		t.Fatalf("trimRlimits = %v, %v; want a change", changed, err)
	}
	var got []struct {
		Type       string
		Hard, Soft uint64
	}
	if err := json.Unmarshal(proc["rlimits"], &got); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		Type       string
		Hard, Soft uint64
	}{{"RLIMIT_NOFILE", nofile.Max, nofile.Max}, {"RLIMIT_CORE", 0, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rlimits = %+v, want %+v", got, want)
	}
	if changed, err := trimRlimits(proc); err != nil || changed {
		t.Fatalf("second trimRlimits = %v, %v; want no change", changed, err)
	}
}

func TestTrimSpecsTrimsRlimitsOnlyWithoutCapSysResource(t *testing.T) {
	allowed, err := boundingSet()
	if err != nil {
		t.Fatal(err)
	}
	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	bundle := t.TempDir()
	asked := uint64(1 << 62)
	writeJSON(t, filepath.Join(bundle, "config.json"), map[string]any{
		"process": map[string]any{"rlimits": []map[string]any{{"type": "RLIMIT_NOFILE", "hard": asked, "soft": asked}}},
	})
	if err := trimSpecs([]string{"create", "--bundle", bundle, "id1"}); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Process struct {
			Rlimits []struct{ Hard, Soft uint64 } `json:"rlimits"`
		} `json:"process"`
	}
	readJSON(t, filepath.Join(bundle, "config.json"), &cfg)
	want := asked
	if !allowed["CAP_SYS_RESOURCE"] {
		want = nofile.Max
	}
	if l := cfg.Process.Rlimits; len(l) != 1 || l[0].Hard != want || l[0].Soft != want {
		t.Fatalf("rlimits = %+v, want hard and soft %d (CAP_SYS_RESOURCE held: %v)", l, want, allowed["CAP_SYS_RESOURCE"])
	}
}
