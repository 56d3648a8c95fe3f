package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// toolSet is one `go build` of one Go module: every package in one
// invocation (shared packages compile once) into one cache directory.
type toolSet struct {
	name  string   // names the set in its key: two sets of one module differ in it
	dir   string   // the module's directory, relative to the repository
	env   []string // NAME=VALUE added to go build's environment
	flags []string // go build flags besides -trimpath and -o
	// pkgs are import paths or ./relative ones ("." the module itself),
	// each PKG=NAME to name the binary NAME instead of what go build
	// names it.
	pkgs []string
}

// binaries are the names of what t builds, in the order of pkgs.
func (t toolSet) binaries(modulePath string) []string {
	var out []string
	for _, spec := range t.pkgs {
		pkg, name, renamed := strings.Cut(spec, "=")
		if !renamed {
			name = builtName(importPath(modulePath, pkg))
		}
		out = append(out, name)
	}
	return out
}

// importPath resolves a ./relative package of the module at modulePath.
func importPath(modulePath, pkg string) string {
	if pkg == "." {
		return modulePath
	}
	if rest, ok := strings.CutPrefix(pkg, "./"); ok {
		return modulePath + "/" + rest
	}
	return pkg
}

var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// builtName is the file `go build -o DIR/` writes for a main package: its
// import path's last element, or the one before a major-version suffix
// (cmd/go: "the last non-major-version component of the package import
// path", go help build).
func builtName(importPath string) string {
	base := path.Base(importPath)
	if majorVersion.MatchString(base) {
		return path.Base(path.Dir(importPath))
	}
	return base
}

// builder builds tool sets into <cache>/tools/<key>.
type builder struct {
	root  string // the repository
	cache string
	log   log.Logger
	// goBuilds counts the go builds run (the tests read it: a warm run runs none).
	goBuilds int
}

// modulePath reads the module line of dir/go.mod.
func modulePath(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod has no module line", dir)
}

// key is what t's cache directory is named after: the module's go.sum
// (which pins every package from the module cache), the set's name, its
// environment, flags and packages, and, only when it builds packages of
// this repository, the content of their source files (go.sum says nothing
// of those). Sets without local packages keep the key hack/test-env.sh
// gave them.
func (b *builder) key(ctx context.Context, t toolSet, modPath string) (string, error) {
	dir := filepath.Join(b.root, t.dir)
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	k := newKey()
	k.raw(sum)
	k.line(t.name)
	k.line(strings.Join(t.env, " "))
	k.line(commandLine(t.flags))
	for _, p := range t.pkgs {
		k.line(p)
	}
	if t.local(modPath) {
		files, err := b.localSources(ctx, t)
		if err != nil {
			return "", err
		}
		sums := fileSums{}
		for _, f := range files {
			s, err := sums.of(f)
			if err != nil {
				return "", err
			}
			rel, _ := filepath.Rel(b.root, f)
			k.line(rel + " " + s)
		}
	}
	return k.sum(), nil
}

// local reports whether t builds a package of its own module (a path
// under it, or ./relative), whose source lives in this repository.
func (t toolSet) local(modPath string) bool {
	for _, spec := range t.pkgs {
		p, _, _ := strings.Cut(spec, "=")
		if p = importPath(modPath, p); p == modPath || strings.HasPrefix(p, modPath+"/") {
			return true
		}
	}
	return false
}

// listedPackage is what `go list -json` says of a package that the key
// reads.
type listedPackage struct {
	Standard bool
	Dir      string
	Module   *struct {
		Main    bool
		GoMod   string
		Replace *struct{ Version string }
	}
	GoFiles, CgoFiles, CFiles, HFiles, SFiles, SysoFiles, EmbedFiles []string
}

// localSources are the files, sorted, of every package t's binaries link
// that is not in the module cache: the main module's and those replaced by
// a directory (a stand-in module's `replace ... => ../../..`), and their
// go.mod files. go list takes t's flags and environment, so build tags
// pick the same files the build does.
func (b *builder) localSources(ctx context.Context, t toolSet) ([]string, error) {
	args := append([]string{"list", "-deps", "-json=Standard,Dir,Module,GoFiles,CgoFiles,CFiles,HFiles,SFiles,SysoFiles,EmbedFiles"}, t.flags...)
	args = append(args, pkgPaths(t)...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(b.root, t.dir)
	cmd.Env = b.goEnv(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s (in %s): %w: %s", strings.Join(pkgPaths(t), " "), t.dir, err, stderr.String())
	}
	seen := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list output: %w", err)
		}
		if p.Standard || p.Module == nil {
			continue
		}
		// The main module's packages and those of a module replaced by a
		// directory: source this tree holds, not the module cache.
		if local := p.Module.Main || p.Module.Replace != nil && p.Module.Replace.Version == ""; !local {
			continue
		}
		seen[p.Module.GoMod] = true
		for _, fs := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.HFiles, p.SFiles, p.SysoFiles, p.EmbedFiles} {
			for _, f := range fs {
				seen[filepath.Join(p.Dir, f)] = true
			}
		}
	}
	delete(seen, "")
	files := make([]string, 0, len(seen))
	for f := range seen {
		files = append(files, f)
	}
	slices.Sort(files)
	return files, nil
}

func pkgPaths(t toolSet) []string {
	var out []string
	for _, spec := range t.pkgs {
		p, _, _ := strings.Cut(spec, "=")
		out = append(out, p)
	}
	return out
}

// goEnv is go's environment for t. Modules other than the repository's
// own are built with -mod=mod, as they always were: their go.sum may lack
// a line go adds; the repository's go.mod is never rewritten by a build.
func (b *builder) goEnv(t toolSet) []string {
	env := append(os.Environ(), t.env...)
	if filepath.Clean(t.dir) != "." {
		env = append(env, "GOFLAGS=-mod=mod")
	}
	return env
}

// build makes t's binaries in <cache>/tools/<key> unless they are there,
// and returns that directory.
func (b *builder) build(ctx context.Context, t toolSet) (string, error) {
	modPath, err := modulePath(filepath.Join(b.root, t.dir))
	if err != nil {
		return "", err
	}
	key, err := b.key(ctx, t, modPath)
	if err != nil {
		return "", fmt.Errorf("keying %s: %w", t.name, err)
	}
	out := filepath.Join(b.cache, "tools", key)
	names := t.binaries(modPath)
	if allExecutable(out, names) {
		return out, nil
	}
	// Beside out, so the binaries rename into it on one filesystem.
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), key+".tmp.*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	b.log.V(0).Infof("building %s(%s); a cold build takes minutes", strings.Join(names, " ")+" ", t.dir)
	args := append([]string{"build", "-trimpath"}, t.flags...)
	args = append(args, "-o", tmp+"/")
	args = append(args, pkgPaths(t)...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(b.root, t.dir)
	cmd.Env = b.goEnv(t)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	b.goBuilds++
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s in %s: %w", strings.Join(names, " "), t.dir, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	for i, spec := range t.pkgs {
		pkg, _, _ := strings.Cut(spec, "=")
		built := builtName(importPath(modPath, pkg))
		if err := os.Rename(filepath.Join(tmp, built), filepath.Join(out, names[i])); err != nil {
			return "", fmt.Errorf("placing %s: %w", names[i], err)
		}
	}
	b.log.V(0).Infof("built in %d s into %s", int(time.Since(start).Seconds()), out)
	return out, nil
}

func allExecutable(dir string, names []string) bool {
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// linkInto points dir/name at target, replacing what is there (ln -sfn)
// in one rename, so a reader never finds the link missing.
func linkInto(dir, name, target string) error {
	dst := filepath.Join(dir, name)
	if cur, err := os.Readlink(dst); err == nil && cur == target {
		return nil
	}
	// A fresh name beside dst: CreateTemp picks one no other run holds,
	// and the symlink takes its place.
	f, err := os.CreateTemp(dir, name+".tmp.*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	if err := os.Remove(tmp); err != nil {
		return err
	}
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// contentKey is the one cache key of `lane-rig env`: the sha256 of what
// an artefact is made from, written as lines (file contents by their own
// sha256). A tool set's key names its directory under <cache>/tools, an
// image's key is the label on it; an artefact whose key is there already
// is not made again, one whose inputs changed in any byte is.
type contentKey struct{ h hash.Hash }

func newKey() *contentKey { return &contentKey{h: sha256.New()} }

// raw adds bytes as they are (a go.sum enters in full, as it always has).
func (k *contentKey) raw(b []byte) { k.h.Write(b) }

func (k *contentKey) line(s string) { k.raw([]byte(s + "\n")) }

func (k *contentKey) sum() string { return hex.EncodeToString(k.h.Sum(nil)) }

// fileSums memoises the sha256 of the files images are made from: the same
// busybox, libraries and binaries go into several images in one run.
type fileSums map[string]string

func (f fileSums) of(path string) (string, error) {
	if s, ok := f[path]; ok {
		return s, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	s := hex.EncodeToString(h.Sum(nil))
	f[path] = s
	return s, nil
}

// commandLine writes arguments as a shell command line would hold them
// (-ldflags='-s -w'): the form the keys of the tool cache have been made
// from since hack/test-env.sh built the tools, so a cache built by it is
// still found.
func commandLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if name, val, ok := strings.Cut(a, "="); ok && strings.ContainsAny(val, " \t") {
			a = name + "='" + val + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
