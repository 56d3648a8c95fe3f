package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// The key of a tool set without local packages is the one
// hack/test-env.sh made with `{ cat go.sum; printf '%s\n' SALT ENV FLAGS
// PKG...; } | sha256sum`, so caches it filled are found: this is that
// shell's output for the inputs below.
func TestToolKeyKeepsTheShellKey(t *testing.T) {
	root := t.TempDir()
	writeModule(t, root, "tools", "module example.com/tools\n", "h1 line\n")
	b := &builder{root: root, cache: t.TempDir(), log: log.Noop}
	ts := toolSet{name: "k8s", dir: "tools", env: []string{"CGO_ENABLED=0"},
		flags: []string{"-tags=a,b", "-ldflags=-s -w -X x.y=1"}, pkgs: []string{"example.org/cmd/one", "example.org/srv/v3=two"}}
	got, err := b.key(context.Background(), ts, "example.com/tools")
	if err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("bash", "-c", `{ printf 'h1 line\n'; printf '%s\n' k8s CGO_ENABLED=0 "-tags=a,b -ldflags='-s -w -X x.y=1'" example.org/cmd/one example.org/srv/v3=two; } | sha256sum | cut -c1-64`)
	want, err := sh.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want[:64]) {
		t.Errorf("key %s, the shell's %s", got, want[:64])
	}
}

func TestToolKeyChangesWithEachInput(t *testing.T) {
	root := t.TempDir()
	writeModule(t, root, "m", "module example.com/m\n", "a\n")
	b := &builder{root: root, cache: t.TempDir(), log: log.Noop}
	base := toolSet{name: "n", dir: "m", env: []string{"E=1"}, flags: []string{"-tags=x"}, pkgs: []string{"example.org/p"}}
	key := func(ts toolSet) string {
		k, err := b.key(context.Background(), ts, "example.com/m")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(base)
	if key(base) != k0 {
		t.Fatal("the same inputs gave two keys")
	}
	for name, ts := range map[string]toolSet{
		"name":  {name: "n2", dir: "m", env: base.env, flags: base.flags, pkgs: base.pkgs},
		"env":   {name: "n", dir: "m", env: []string{"E=2"}, flags: base.flags, pkgs: base.pkgs},
		"flags": {name: "n", dir: "m", env: base.env, flags: []string{"-tags=y"}, pkgs: base.pkgs},
		"pkgs":  {name: "n", dir: "m", env: base.env, flags: base.flags, pkgs: []string{"example.org/p=q"}},
	} {
		if key(ts) == k0 {
			t.Errorf("changing the %s kept the key", name)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "m", "go.sum"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if key(base) == k0 {
		t.Error("changing go.sum kept the key")
	}
}

// A set building this repository's own package is keyed by its source
// too, which go.sum does not pin, and builds into the cache once.
func TestLocalPackageBuildsOnceAndAgainWhenItsSourceChanges(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("go not found:", err)
	}
	root := t.TempDir()
	writeModule(t, root, "tool", "module example.com/tool\n\ngo 1.26\n", "")
	src := filepath.Join(root, "tool", "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &builder{root: root, cache: t.TempDir(), log: log.Noop}
	ts := toolSet{name: "t", dir: "tool", env: []string{"CGO_ENABLED=0"}, flags: []string{"-buildvcs=false"}, pkgs: []string{".=renamed"}}
	first, err := b.build(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	if !allExecutable(first, []string{"renamed"}) || b.goBuilds != 1 {
		t.Fatalf("after a cold build: %d builds, renamed in %s: %v", b.goBuilds, first, allExecutable(first, []string{"renamed"}))
	}
	if again, err := b.build(context.Background(), ts); err != nil || again != first || b.goBuilds != 1 {
		t.Fatalf("a warm build ran go build (%d builds, dir %s, %v)", b.goBuilds, again, err)
	}
	if err := os.WriteFile(src, []byte("package main\n\n// changed\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := b.build(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	if changed == first || b.goBuilds != 2 {
		t.Errorf("a changed source: %d builds, dir %s (was %s)", b.goBuilds, changed, first)
	}
}

func TestBinaryNames(t *testing.T) {
	ts := toolSet{pkgs: []string{"go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3=etcd", ".", "./test/standin/cnimulti=cni", "./x/pause", "k8s.io/kubernetes/cmd/kubelet"}}
	got := ts.binaries("github.com/o/standin")
	want := []string{"server", "etcd", "standin", "cni", "pause", "kubelet"}
	if len(got) != len(want) {
		t.Fatalf("binaries %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("binaries %v, want %v", got, want)
			break
		}
	}
	if !ts.local("github.com/o/standin") || (toolSet{pkgs: []string{"k8s.io/x"}}).local("github.com/o/standin") {
		t.Error("local: want true for ./ and . packages, false for a module-cache one")
	}
}

func TestCommandLineQuotesValuesWithSpaces(t *testing.T) {
	got := commandLine([]string{"-buildmode=pie", "-ldflags=-s -w", "-trimpath"})
	if want := "-buildmode=pie -ldflags='-s -w' -trimpath"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// The rig registry serves an image at the path a lane's mirror asks for:
// cni.MirrorImage's, Docker Hub's library/ made explicit.
func TestMirrorPath(t *testing.T) {
	if got := mirrorPath("ghcr.io/flannel-io/flannel:v0.28.9"); got != "flannel-io/flannel:v0.28.9" {
		t.Errorf("a ghcr.io image at %q", got)
	}
	if got := mirrorPath("busybox:1.37.0"); got != "library/busybox:1.37.0" {
		t.Errorf("a Docker Hub image at %q", got)
	}
}

func TestLddPaths(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibmnl.so.0 => /lib/x86_64-linux-gnu/libmnl.so.0 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n"
	got := lddPaths(out)
	if len(got) != 2 || got[0] != "/lib/x86_64-linux-gnu/libmnl.so.0" || got[1] != "/lib64/ld-linux-x86-64.so.2" {
		t.Errorf("lddPaths = %v", got)
	}
}

func writeModule(t *testing.T, root, dir, gomod, gosum string) {
	t.Helper()
	d := filepath.Join(root, dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if gosum != "" {
		if err := os.WriteFile(filepath.Join(d, "go.sum"), []byte(gosum), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
