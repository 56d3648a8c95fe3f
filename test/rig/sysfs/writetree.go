package sysfs

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// WriteTree writes the tree a mount of k shows now into dir (which must
// not exist yet), as plain directories, files and symlinks: the same
// resolution Serve answers lookups with, so there is one model of the
// kernel's sysfs. It is for tests that read a fake sysfs and may not mount
// one (no root, no FUSE): they change k through its Store methods, the
// kernel's stores, then write the tree and read it. Writes to the copy
// reach nothing.
//
// A copy has no caller whose netns it could show, so class/net and the
// functions' net/ directories hold each function's netdev under the name
// and MAC it was registered with, as a sysfs mounted in the netns that
// holds them all would; without a link to read, a netdev shows only its
// address and device.
func (k *Kernel) WriteTree(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("writing the fake sysfs: %w", err)
	}
	r := &request{ctx: context.Background(), k: k, fns: k.snapshot()}
	r.view = recordedNetView(k.nic, r.fns)
	return r.writeTree(dir, "")
}

// recordedNetView shows every function's netdev as recorded, while a
// network driver is bound to it (unbinding unregisters it).
func recordedNetView(nic NIC, fns map[string]fnState) *netView {
	v := &netView{byBDF: map[string][]netdev{}}
	for bdf, f := range fns {
		if f.NetName != "" && nic.netDriver(f.Driver) {
			d := netdev{name: f.NetName, mac: f.MAC, bdf: bdf}
			v.links = append(v.links, d)
			v.byBDF[bdf] = append(v.byBDF[bdf], d)
		}
	}
	sort.Slice(v.links, func(i, j int) bool { return v.links[i].name < v.links[j].name })
	return v
}

// writeTree writes the entry at p (relative to the tree) and, for a
// directory, everything under it.
func (r *request) writeTree(root, p string) error {
	e := r.resolve(p)
	if e == nil {
		return nil
	}
	dst := filepath.Join(root, p)
	switch e.kind {
	case kindLink:
		if err := os.Symlink(e.target, dst); err != nil {
			return fmt.Errorf("writing the fake sysfs: %w", err)
		}
	case kindFile:
		var content []byte
		if e.read != nil {
			content = e.read()
		}
		if err := os.WriteFile(dst, content, fs.FileMode(e.mode)); err != nil {
			return fmt.Errorf("writing the fake sysfs: %w", err)
		}
	case kindDir:
		if p != "" {
			if err := os.Mkdir(dst, fs.FileMode(e.mode)); err != nil {
				return fmt.Errorf("writing the fake sysfs: %w", err)
			}
		}
		for _, name := range e.list() {
			child := name
			if p != "" {
				child = p + "/" + name
			}
			if err := r.writeTree(root, child); err != nil {
				return err
			}
		}
	}
	return nil
}
