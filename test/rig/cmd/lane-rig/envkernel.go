package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/test/kernel/vm"
)

// guestKernel is a kernel the kernel tier (test/kernel) boots: the
// linux-image package Debian's linux-image-amd64 depends on in a suite.
type guestKernel struct {
	name    string // the directory under bin/test-assets/kernels
	release string // apt's target release ("" for the default)
}

var guestKernels = []guestKernel{{"bookworm-6.1", ""}, {"bookworm-backports-6.12", "bookworm-backports"}}

// kernelModuleRoots are the modules the tier loads; their dependencies
// come with them. igb/igbvf drive QEMU's 82576 PF and its VFs, vfio-pci
// and its IOMMU backend give /dev/vfio, veth makes the links the rig's
// fake uses.
var kernelModuleRoots = []string{"igb", "igbvf", "vfio_iommu_type1", "vfio-pci", "veth"}

// kernelsFormat changes when what a kernel's cache directory holds does.
const kernelsFormat = "kernels v2"

// kernels makes every guest kernel and links it into
// bin/test-assets/kernels/<name>.
func (e *env) kernels(ctx context.Context) error {
	dir := filepath.Join(e.assets, "kernels")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pkgs, err := resolveKernels(ctx, filepath.Join(e.o.cache, "kernels", "resolved.json"))
	if err != nil {
		return err
	}
	for i, g := range guestKernels {
		cached, err := e.kernel(ctx, g, pkgs[i])
		if err != nil {
			return fmt.Errorf("guest kernel %s: %w", g.name, err)
		}
		if err := e.probeAccel(ctx, g, cached); err != nil {
			return fmt.Errorf("guest kernel %s: %w", g.name, err)
		}
		if err := linkInto(dir, g.name, cached); err != nil {
			return fmt.Errorf("linking %s into %s: %w", g.name, dir, err)
		}
	}
	return nil
}

// aptPackage is one package version as apt-cache show gives it.
type aptPackage struct{ Name, Version, File, SHA256 string }

// resolved is what resolveKernels found, and the apt state it found it in.
type resolved struct {
	AptState string
	Packages []aptPackage
}

// resolveKernels resolves every guest kernel's package, or reads them
// from file when apt's state (aptState) is what it was then: apt-cache
// here has no package cache (Dir::Cache::pkgcache ""), so each lookup
// parses every list, ~1 s of CPU, and a warm run would be nothing but
// those lookups.
func resolveKernels(ctx context.Context, file string) ([]aptPackage, error) {
	state, err := aptState()
	if err != nil {
		return nil, err
	}
	var r resolved
	if b, err := os.ReadFile(file); err == nil && json.Unmarshal(b, &r) == nil && r.AptState == state && len(r.Packages) == len(guestKernels) {
		return r.Packages, nil
	}
	r = resolved{AptState: state, Packages: make([]aptPackage, len(guestKernels))}
	errs := make([]error, len(guestKernels))
	var wg sync.WaitGroup
	for i, g := range guestKernels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Packages[i], errs[i] = resolveKernel(ctx, g.release)
		}()
	}
	wg.Wait()
	for i, g := range guestKernels {
		if errs[i] != nil {
			return nil, fmt.Errorf("guest kernel %s: %w", g.name, errs[i])
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	return r.Packages, atomicfile.Write(file, b, 0o644)
}

// aptState is a key of the questions and of what apt's answers depend
// on: the suites' signed Release files (which hold the sums of their
// package lists), the sources and the pinning.
func aptState() (string, error) {
	var files []string
	for _, g := range []string{"/var/lib/apt/lists/*Release", "/etc/apt/sources.list", "/etc/apt/sources.list.d/*", "/etc/apt/preferences", "/etc/apt/preferences.d/*"} {
		m, err := filepath.Glob(g)
		if err != nil {
			return "", err
		}
		files = append(files, m...)
	}
	k := newKey()
	for _, g := range guestKernels {
		k.line(g.name + " " + g.release)
	}
	sums := fileSums{}
	for _, f := range files {
		s, err := sums.of(f)
		if err != nil {
			return "", err
		}
		k.line(f + " " + s)
	}
	return k.sum(), nil
}

// resolveKernel finds the concrete linux-image package linux-image-amd64
// depends on in release, and its file.
func resolveKernel(ctx context.Context, release string) (aptPackage, error) {
	apt := func(args ...string) (string, error) {
		if release != "" {
			args = append([]string{"-t", release}, args...)
		}
		out, err := exec.CommandContext(ctx, "apt-cache", args...).Output()
		if err != nil {
			return "", fmt.Errorf("apt-cache %s: %w", strings.Join(args, " "), err)
		}
		return string(out), nil
	}
	deps, err := apt("depends", "linux-image-amd64")
	if err != nil {
		return aptPackage{}, err
	}
	var p aptPackage
	for _, l := range strings.Split(deps, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
			p.Name = f[1]
			break
		}
	}
	if p.Name == "" {
		return p, fmt.Errorf("linux-image-amd64 depends on no linux-image-* package (is the suite in apt's sources? `make test-env` adds bookworm-backports): %q", deps)
	}
	show, err := apt("show", "--no-all-versions", p.Name)
	if err != nil {
		return p, err
	}
	for _, l := range strings.Split(show, "\n") {
		k, v, _ := strings.Cut(l, ": ")
		switch k {
		case "Version":
			p.Version = v
		case "Filename":
			p.File = filepath.Base(v)
		case "SHA256":
			p.SHA256 = v
		}
	}
	if p.Version == "" || p.File == "" {
		return p, fmt.Errorf("apt-cache show %s: no Version or Filename", p.Name)
	}
	return p, nil
}

// kernel makes g's cache directory from package p, <cache>/kernels/<package file>/, once
// per package file and module list: vmlinuz, the modules uncompressed in
// load order, kernel.json.
func (e *env) kernel(ctx context.Context, g guestKernel, p aptPackage) (string, error) {
	dir := filepath.Join(e.o.cache, "kernels", p.File)
	k := newKey()
	k.line(kernelsFormat)
	k.line(g.name + " " + p.Name + " " + p.Version + " " + p.File + " " + p.SHA256)
	k.line(strings.Join(kernelModuleRoots, " "))
	key := k.sum()
	keyFile := filepath.Join(dir, "key")
	if b, err := os.ReadFile(keyFile); err == nil && strings.TrimSpace(string(b)) == key {
		return dir, nil
	}
	e.l.V(0).Infof("unpacking %s %s (%s)", p.Name, p.Version, g.name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	work := dir + ".work"
	if err := os.RemoveAll(work); err != nil {
		return "", err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	get := exec.CommandContext(ctx, "apt-get", "download", p.Name+"="+p.Version)
	if g.release != "" {
		get.Args = append(get.Args[:1], append([]string{"-t", g.release}, get.Args[1:]...)...)
	}
	get.Dir = work
	if out, err := get.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", strings.Join(get.Args, " "), err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(work, "*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download %s left %d .deb files in %s", p.Name, len(debs), work)
	}
	root := filepath.Join(work, "root")
	if out, err := exec.CommandContext(ctx, "dpkg", "-x", debs[0], root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg -x %s: %w: %s", debs[0], err, out)
	}
	rels, _ := filepath.Glob(filepath.Join(root, "lib/modules/*"))
	if len(rels) != 1 {
		return "", fmt.Errorf("%s holds %d lib/modules/* directories, want 1", p.File, len(rels))
	}
	release := filepath.Base(rels[0])
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(tmp, "modules"), 0o755); err != nil {
		return "", err
	}
	if err := copyFile(filepath.Join(root, "boot", "vmlinuz-"+release), filepath.Join(tmp, "vmlinuz")); err != nil {
		return "", err
	}
	// The kernel's build config, beside vmlinuz: the product tests read
	// it in the guest to say which VFIO features (device cdevs, iommufd)
	// the kernel was built with.
	if err := copyFile(filepath.Join(root, "boot", "config-"+release), filepath.Join(tmp, "config-"+release)); err != nil {
		return "", err
	}
	mods, err := moduleLoadOrder(ctx, rels[0], filepath.Join(tmp, "modules"), kernelModuleRoots)
	if err != nil {
		return "", err
	}
	desc := vm.Kernel{Name: g.name, Release: release, Package: p.File, Vmlinuz: "vmlinuz", Modules: mods}
	b, err := json.MarshalIndent(desc, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, vm.KernelFile), append(b, '\n'), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	if err := atomicfile.Write(keyFile, []byte(key+"\n"), 0o644); err != nil {
		return "", err
	}
	e.l.V(0).Infof("%s: %s, %d modules: %s", g.name, release, len(mods), strings.Join(mods, " "))
	return dir, nil
}

// moduleLoadOrder writes the roots and the modules they depend on,
// uncompressed, into out, and returns their paths relative to out's parent
// in an order each loads after what it depends on. The dependencies are
// each module's "depends=" in its .modinfo section, what modpost records
// from the symbols it uses and depmod reads back (torvalds/linux
// scripts/mod/modpost.c@v6.1, add_depends). modules.dep is not in Debian's
// package (its postinst runs depmod), and the host needs no kmod this way.
// A name the package's modules.builtin lists is built in and skipped.
func moduleLoadOrder(ctx context.Context, modDir, out string, roots []string) ([]string, error) {
	files := map[string]string{} // module name -> file under modDir
	err := filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		for _, ext := range []string{".ko", ".ko.xz"} {
			if n, ok := strings.CutSuffix(d.Name(), ext); ok {
				files[modName(n)] = p
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			builtin[modName(strings.TrimSuffix(filepath.Base(sc.Text()), ".ko"))] = true
		}
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		name = modName(name)
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle at %s", name)
		case 2:
			return nil
		}
		src, ok := files[name]
		if !ok {
			if builtin[name] {
				state[name] = 2
				return nil
			}
			return fmt.Errorf("module %s (needed by %s) is neither in %s nor built in", name, from, modDir)
		}
		state[name] = 1
		dst := filepath.Join(out, filepath.Base(strings.TrimSuffix(src, ".xz")))
		if err := unpackModule(ctx, src, dst); err != nil {
			return err
		}
		deps, err := moduleDepends(dst)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, filepath.Join(filepath.Base(out), filepath.Base(dst)))
		return nil
	}
	for _, r := range roots {
		if err := visit(r, "the kernel tier"); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// modName is a module's name as the kernel compares them: '-' and '_' are
// one (torvalds/linux kernel/params.c@v6.1, parameq).
func modName(n string) string { return strings.ReplaceAll(n, "-", "_") }

func unpackModule(ctx context.Context, src, dst string) error {
	if !strings.HasSuffix(src, ".xz") {
		return copyFile(src, dst)
	}
	out, err := exec.CommandContext(ctx, "xz", "-dc", src).Output()
	if err != nil {
		return fmt.Errorf("xz -dc %s: %w", src, err)
	}
	return os.WriteFile(dst, out, 0o644)
}

// moduleDepends reads "depends=a,b" from a module's .modinfo section.
func moduleDepends(ko string) ([]string, error) {
	f, err := elf.Open(ko)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("%s has no .modinfo section", ko)
	}
	b, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("%s .modinfo: %w", ko, err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// probeAccel records in dir's vm.AccelFile whether the kernel boots under
// KVM on this host (vm.ProbeKVM), once per QEMU version and /dev/kvm
// presence: the tier then boots it under KVM, else under TCG.
func (e *env) probeAccel(ctx context.Context, g guestKernel, dir string) error {
	key, err := vm.ProbeKey(ctx)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, vm.AccelFile)
	var was vm.AccelProbe
	if b, err := os.ReadFile(file); err == nil && json.Unmarshal(b, &was) == nil && was.Key == key {
		return nil
	}
	k, err := vm.ReadKernel(dir)
	if err != nil {
		return err
	}
	p := vm.AccelProbe{Key: key, Accel: "kvm"}
	if err := vm.ProbeKVM(ctx, k); err != nil {
		p.Accel, p.Why = "tcg", err.Error()
	}
	e.l.V(0).Infof("%s boots under %s here%s", g.name, p.Accel, map[bool]string{true: " (KVM: " + p.Why + ")", false: ""}[p.Why != ""])
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(file, append(b, '\n'), 0o644)
}
