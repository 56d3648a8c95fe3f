package sysfs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/test/vfiouser"
)

// Server is a mounted fake sysfs (and fake /dev/vfio) backed by a Kernel.
type Server struct {
	Kernel *Kernel
	cfg    ServeConfig
	mounts []*fuse.Server
	dirs   []string
	once   sync.Once
	err    error
}

// Serve mounts the fake sysfs at cfg.SysfsDir (and the fake /dev/vfio at
// cfg.VFIODir) and serves it until Close. A stale mount left at either
// place by a server that died is detached first.
func Serve(cfg ServeConfig) (*Server, error) {
	for _, d := range []string{cfg.SysfsDir, cfg.VFIODir} {
		if d != "" {
			Unmount(d)
		}
	}
	if err := mkdirs(cfg.SysfsDir, cfg.VFIODir); err != nil {
		return nil, fmt.Errorf("creating mount points: %w", err)
	}
	k, err := NewKernel(cfg.KernelConfig)
	if err != nil {
		return nil, err
	}
	s := &Server{Kernel: k, cfg: cfg}
	zero := time.Duration(0)
	opts := func(name string) *fs.Options {
		return &fs.Options{
			// Every entry and attribute is dynamic (the caller's netns,
			// the current PCI state): the kernel must ask each time.
			EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
			NullPermissions: true,
			MountOptions: fuse.MountOptions{
				AllowOther:        true, // Docker and node containers read it
				DirectMountStrict: true, // no fusermount on these machines
				FsName:            name,
				Name:              "sriov-lane-rig",
				DisableXAttrs:     true,
				MaxWrite:          4096,
			},
		}
	}
	mount := func(dir string, root fs.InodeEmbedder, name string) error {
		if cfg.Owner != "" {
			name = cfg.Owner + "-" + name
		}
		srv, err := fs.Mount(dir, root, opts(name))
		if err != nil {
			return fmt.Errorf("mounting fake %s at %s: %w", name, dir, err)
		}
		s.mounts = append(s.mounts, srv)
		s.dirs = append(s.dirs, dir)
		return nil
	}
	if err := mount(cfg.SysfsDir, &sysNode{k: k}, "sysfs"); err != nil {
		k.Close()
		return nil, err
	}
	if cfg.VFIODir != "" {
		if err := mount(cfg.VFIODir, &vfioNode{k: k}, "vfio"); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close fails every store blocked on a held VFIO device, then unmounts
// (detaching a busy mount) and waits for the serving loops, at most
// closeWait: bind mounts of the fake sysfs in containers keep its FUSE
// connection, and so the loops, alive until they are gone too.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.Kernel.Close()
		var errs []error
		for i, m := range s.mounts {
			if err := unix.Unmount(s.dirs[i], 0); err != nil {
				if derr := unix.Unmount(s.dirs[i], unix.MNT_DETACH); derr != nil {
					errs = append(errs, fmt.Errorf("unmounting %s: %v; detaching: %w", s.dirs[i], err, derr))
					continue
				}
			}
			done := make(chan struct{})
			go func() { m.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(closeWait):
				s.Kernel.log.Printf("%s: unmounted, but its FUSE connection is still in use elsewhere (a container's bind mount?); not waiting", s.dirs[i])
			}
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

const closeWait = 5 * time.Second

// Unmount detaches the fake sysfs (or /dev/vfio) mounted at dir, typically
// the dead mount of a server that was killed ("transport endpoint is not
// connected"); anything else mounted there is left alone.
func Unmount(dir string) {
	for range 8 { // stacked mounts, one at a time
		if !Mounted(dir) {
			return
		}
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return
		}
	}
}

// Mounted reports whether a fake sysfs server is mounted at dir.
func Mounted(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return errors.Is(err, unix.ENOTCONN)
	}
	return st.Type == unix.FUSE_SUPER_MAGIC
}

// entry kinds of the fake sysfs.
const (
	kindDir = iota
	kindFile
	kindLink
)

// entry is one resolved path of the fake sysfs.
type entry struct {
	kind   int
	mode   uint32 // permission bits
	target string
	read   func() []byte
	write  func([]byte) syscall.Errno
	list   func() []string
}

func dirEntry(names ...string) *entry {
	return &entry{kind: kindDir, mode: 0o755, list: func() []string { return names }}
}

func linkEntry(target string) *entry { return &entry{kind: kindLink, mode: 0o777, target: target} }

func roFile(s string) *entry {
	return &entry{kind: kindFile, mode: 0o444, read: func() []byte { return []byte(s + "\n") }}
}

func woFile(w func([]byte) syscall.Errno) *entry {
	return &entry{kind: kindFile, mode: 0o200, write: w}
}

// request resolves paths for one FUSE request; the netns view is built
// only when a path needs it.
type request struct {
	ctx  context.Context
	k    *Kernel
	fns  map[string]fnState
	view *netView
	err  error
}

func (r *request) netView() *netView {
	if r.view == nil && r.err == nil {
		r.view, r.err = callerNetView(r.ctx, r.k.nic, r.fns)
		if r.err != nil {
			r.k.log.Printf("caller netns view: %v", r.err)
			r.view = &netView{byBDF: map[string][]netdev{}}
		}
	}
	return r.view
}

const pciDir = "devices/pci0000:00"

// resolve maps a path (relative to the mount, "" for the root) to what
// the kernel would show there, nil when nothing is.
func (r *request) resolve(p string) *entry {
	c := strings.Split(p, "/")
	if p == "" {
		c = nil
	}
	switch {
	case len(c) == 0:
		return dirEntry("bus", "class", "devices", "kernel", "module")
	case c[0] == "bus":
		return r.bus(c[1:])
	case c[0] == "class":
		return r.class(c[1:])
	case c[0] == "devices":
		return r.devices(c[1:])
	case c[0] == "kernel":
		return r.iommu(c[1:])
	case c[0] == "module":
		switch len(c) {
		case 1:
			return dirEntry("vfio_pci")
		case 2:
			if c[1] == "vfio_pci" {
				return dirEntry()
			}
		}
	}
	return nil
}

func (r *request) bdfs() []string {
	out := make([]string, 0, len(r.fns))
	for bdf := range r.fns {
		out = append(out, bdf)
	}
	sortStrings(out)
	return out
}

// onlyEntry starts a lookup in a directory that holds the single entry
// name, as bus/, class/ and kernel/ do here: the directory itself for an
// empty path, and whether the path goes on under name (if not, nothing is
// there).
func onlyEntry(c []string, name string) (dir *entry, under bool) {
	if len(c) == 0 {
		return dirEntry(name), false
	}
	return nil, c[0] == name
}

func (r *request) bus(c []string) *entry {
	if dir, under := onlyEntry(c, "pci"); !under {
		return dir
	}
	if len(c) == 1 {
		return dirEntry("devices", "drivers", "drivers_probe")
	}
	switch c[1] {
	case "drivers_probe":
		if len(c) == 2 {
			return woFile(r.k.StoreDriversProbe)
		}
	case "devices":
		if len(c) == 2 {
			return &entry{kind: kindDir, mode: 0o755, list: r.bdfs}
		}
		if _, ok := r.fns[c[2]]; ok && len(c) == 3 {
			return linkEntry("../../../" + pciDir + "/" + c[2])
		}
	case "drivers":
		if len(c) == 2 {
			return dirEntry(r.k.nic.drivers()...)
		}
		d := c[2]
		if !r.k.nic.knows(d) {
			return nil
		}
		if len(c) == 3 {
			return &entry{kind: kindDir, mode: 0o755, list: func() []string {
				names := []string{"bind", "unbind"}
				for _, bdf := range r.bdfs() {
					if r.fns[bdf].Driver == d {
						names = append(names, bdf)
					}
				}
				return names
			}}
		}
		if len(c) > 4 {
			return nil
		}
		switch c[3] {
		case "bind":
			return woFile(func(b []byte) syscall.Errno { return r.k.StoreBind(d, b) })
		case "unbind":
			return woFile(func(b []byte) syscall.Errno { return r.k.StoreUnbind(d, b) })
		}
		if f, ok := r.fns[c[3]]; ok && f.Driver == d {
			return linkEntry("../../../../" + pciDir + "/" + c[3])
		}
	}
	return nil
}

func (r *request) class(c []string) *entry {
	if dir, under := onlyEntry(c, "net"); !under || len(c) > 2 {
		return dir
	}
	v := r.netView()
	if len(c) == 1 {
		return &entry{kind: kindDir, mode: 0o755, list: func() []string {
			var names []string
			for _, d := range v.links {
				names = append(names, d.name)
			}
			return names
		}}
	}
	d, ok := v.byName(c[1])
	if !ok {
		return nil
	}
	if d.bdf != "" {
		return linkEntry("../../" + pciDir + "/" + d.bdf + "/net/" + d.name)
	}
	return linkEntry("../../devices/virtual/net/" + d.name)
}

func (r *request) devices(c []string) *entry {
	if len(c) == 0 {
		return dirEntry("pci0000:00", "virtual")
	}
	switch c[0] {
	case "virtual":
		switch {
		case len(c) == 1:
			return dirEntry("net")
		case c[1] != "net":
			return nil
		case len(c) == 2:
			v := r.netView()
			return &entry{kind: kindDir, mode: 0o755, list: func() []string {
				var names []string
				for _, d := range v.links {
					if d.bdf == "" {
						names = append(names, d.name)
					}
				}
				return names
			}}
		}
		d, ok := r.netView().byName(c[2])
		if !ok || d.bdf != "" {
			return nil
		}
		return netdevEntry(d, c[3:])
	case "pci0000:00":
		if len(c) == 1 {
			return &entry{kind: kindDir, mode: 0o755, list: r.bdfs}
		}
		f, ok := r.fns[c[1]]
		if !ok {
			return nil
		}
		return r.function(f, c[2:])
	}
	return nil
}

// netdevEntry is net/<name>/... of one netdev. One known only by its
// record (WriteTree; a link's ifindex is never 0) has no link to read
// ifindex, mtu and operstate from.
func netdevEntry(d netdev, c []string) *entry {
	linked := d.ifindex != 0
	if len(c) == 0 {
		names := []string{"address"}
		if linked {
			names = append(names, "ifindex", "mtu", "operstate", "type")
		}
		if d.bdf != "" {
			names = append(names, "device")
		}
		return dirEntry(names...)
	}
	if len(c) > 1 {
		return nil
	}
	switch c[0] {
	case "address":
		return roFile(d.mac)
	case "ifindex":
		if linked {
			return roFile(strconv.Itoa(d.ifindex))
		}
	case "mtu":
		if linked {
			return roFile(strconv.Itoa(d.mtu))
		}
	case "operstate":
		if linked {
			return roFile(d.oper)
		}
	case "type":
		// ARPHRD_ETHER: the rig's links are veths, Ethernet as a NIC's
		// netdev is (a real kernel shows type for every netdev; the DRA
		// driver reads it for its linkType attribute).
		if linked {
			return roFile("1")
		}
	case "device":
		if d.bdf != "" {
			return linkEntry("../../../" + d.bdf)
		}
	}
	return nil
}

func (r *request) function(f fnState, c []string) *entry {
	k := r.k
	bdf := f.BDF
	group, _ := iommuGroup(bdf)
	netBound := k.nic.netDriver(f.Driver)
	if len(c) == 0 {
		names := []string{"class", "device", "driver_override", "iommu_group", "numa_node", "vendor"}
		if f.Driver != "" {
			names = append(names, "driver")
		}
		if netBound {
			names = append(names, "net")
		}
		if f.isPF() {
			names = append(names, "sriov_drivers_autoprobe", "sriov_numvfs", "sriov_totalvfs")
			for j := 0; j < f.NumVFs; j++ {
				names = append(names, "virtfn"+strconv.Itoa(j))
			}
		} else {
			names = append(names, "physfn")
		}
		sortStrings(names)
		return dirEntry(names...)
	}
	if c[0] == "net" {
		if !netBound {
			return nil
		}
		devs := r.netView().byBDF[bdf]
		if len(c) == 1 {
			names := make([]string, len(devs))
			for i, d := range devs {
				names[i] = d.name
			}
			return dirEntry(names...)
		}
		for _, d := range devs {
			if d.name == c[1] {
				return netdevEntry(d, c[2:])
			}
		}
		return nil
	}
	if len(c) > 1 {
		return nil
	}
	switch name := c[0]; name {
	case "vendor":
		return roFile(k.nic.Vendor)
	case "device":
		return roFile(f.Device)
	case "class":
		return roFile(ClassNet)
	case "numa_node":
		return roFile("0")
	case "iommu_group":
		return linkEntry("../../../kernel/iommu_groups/" + strconv.Itoa(group))
	case "driver_override":
		return &entry{kind: kindFile, mode: 0o644,
			read: func() []byte {
				if f.Override == nil {
					return []byte("(null)\n")
				}
				return []byte(*f.Override + "\n")
			},
			write: func(b []byte) syscall.Errno { return k.StoreOverride(bdf, b) }}
	case "driver":
		if f.Driver != "" {
			return linkEntry("../../../bus/pci/drivers/" + f.Driver)
		}
	case "physfn":
		if !f.isPF() {
			return linkEntry("../" + f.PF)
		}
	case "sriov_totalvfs":
		if f.isPF() {
			return roFile(strconv.Itoa(f.TotalVFs))
		}
	case "sriov_numvfs":
		if f.isPF() {
			return &entry{kind: kindFile, mode: 0o644,
				read:  func() []byte { return []byte(strconv.Itoa(k.ShowNumVFs(bdf)) + "\n") },
				write: func(b []byte) syscall.Errno { return k.StoreNumVFs(bdf, b) }}
		}
	case "sriov_drivers_autoprobe":
		if f.isPF() {
			return &entry{kind: kindFile, mode: 0o644,
				read: func() []byte {
					if f.Autoprobe {
						return []byte("1\n")
					}
					return []byte("0\n")
				},
				write: func(b []byte) syscall.Errno { return k.StoreAutoprobe(bdf, b) }}
		}
	default:
		if f.isPF() && strings.HasPrefix(name, "virtfn") {
			if j, err := strconv.Atoi(strings.TrimPrefix(name, "virtfn")); err == nil && j >= 0 && j < f.NumVFs &&
				name == "virtfn"+strconv.Itoa(j) {
				return linkEntry("../" + VFBDF(bdf, j))
			}
		}
	}
	return nil
}

func (r *request) iommu(c []string) *entry {
	if dir, under := onlyEntry(c, "iommu_groups"); !under {
		return dir
	}
	members := map[string][]string{}
	for _, bdf := range r.bdfs() {
		if g, err := iommuGroup(bdf); err == nil {
			members[strconv.Itoa(g)] = append(members[strconv.Itoa(g)], bdf)
		}
	}
	if len(c) == 1 {
		var names []string
		for g := range members {
			names = append(names, g)
		}
		sortStrings(names)
		return dirEntry(names...)
	}
	devs, ok := members[c[1]]
	switch {
	case !ok:
		return nil
	case len(c) == 2:
		return dirEntry("devices")
	case c[2] != "devices":
		return nil
	case len(c) == 3:
		return dirEntry(devs...)
	case len(c) == 4:
		for _, bdf := range devs {
			if bdf == c[3] {
				return linkEntry("../../../../" + pciDir + "/" + bdf)
			}
		}
	}
	return nil
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// inoOf gives each path and kind a stable inode number, so the kernel's
// revalidation of a cached entry finds the same node while the path means
// the same thing.
func inoOf(p string, kind int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p))
	h.Write([]byte{byte(kind)})
	ino := h.Sum64() >> 1
	if ino < 2 {
		ino += 2
	}
	return ino
}

func fuseMode(e *entry) uint32 {
	switch e.kind {
	case kindDir:
		return fuse.S_IFDIR | e.mode
	case kindLink:
		return fuse.S_IFLNK | e.mode
	}
	return fuse.S_IFREG | e.mode
}

func fillAttr(e *entry, ino uint64, a *fuse.Attr) {
	a.Mode = fuseMode(e)
	a.Ino = ino
	a.Nlink = 1
	switch e.kind {
	case kindFile:
		a.Size = 4096 // what sysfs reports for every attribute
	case kindLink:
		a.Size = uint64(len(e.target))
	}
	a.Blksize = 4096
}

// sysNode is any path of the fake sysfs; what it is comes from resolving
// its path against the Kernel on every request.
type sysNode struct {
	fs.Inode
	k    *Kernel
	path string
}

var (
	_ fs.NodeLookuper   = (*sysNode)(nil)
	_ fs.NodeReaddirer  = (*sysNode)(nil)
	_ fs.NodeGetattrer  = (*sysNode)(nil)
	_ fs.NodeSetattrer  = (*sysNode)(nil)
	_ fs.NodeOpener     = (*sysNode)(nil)
	_ fs.NodeReadlinker = (*sysNode)(nil)
)

func (n *sysNode) req(ctx context.Context) *request {
	return &request{ctx: ctx, k: n.k, fns: n.k.snapshot()}
}

func (n *sysNode) child(name string) string {
	if n.path == "" {
		return name
	}
	return n.path + "/" + name
}

func (n *sysNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := n.child(name)
	e := n.req(ctx).resolve(p)
	if e == nil {
		return nil, syscall.ENOENT
	}
	ino := inoOf(p, e.kind)
	fillAttr(e, ino, &out.Attr)
	return n.NewInode(ctx, &sysNode{k: n.k, path: p}, fs.StableAttr{Mode: fuseMode(e), Ino: ino}), 0
}

func (n *sysNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	r := n.req(ctx)
	e := r.resolve(n.path)
	if e == nil {
		return nil, syscall.ENOENT
	}
	if e.kind != kindDir {
		return nil, syscall.ENOTDIR
	}
	var out []fuse.DirEntry
	for _, name := range e.list() {
		p := n.child(name)
		if ce := r.resolve(p); ce != nil {
			out = append(out, fuse.DirEntry{Name: name, Mode: fuseMode(ce), Ino: inoOf(p, ce.kind)})
		}
	}
	return fs.NewListDirStream(out), 0
}

func (n *sysNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	e := n.req(ctx).resolve(n.path)
	if e == nil {
		return syscall.ENOENT
	}
	fillAttr(e, inoOf(n.path, e.kind), &out.Attr)
	return 0
}

// Setattr accepts the truncation of O_TRUNC (sysfs ignores it) and mode
// changes; the kernel stores nothing else either.
func (n *sysNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.Getattr(ctx, fh, out)
}

func (n *sysNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	e := n.req(ctx).resolve(n.path)
	if e == nil {
		return nil, syscall.ENOENT
	}
	if e.kind != kindLink {
		return nil, syscall.EINVAL
	}
	return []byte(e.target), 0
}

// Open is kernfs_fop_open: EACCES for a read of a write-only attribute or
// a write of a read-only one, whoever asks.
func (n *sysNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	e := n.req(ctx).resolve(n.path)
	if e == nil {
		return nil, 0, syscall.ENOENT
	}
	if e.kind == kindDir {
		return nil, 0, syscall.EISDIR
	}
	acc := int(flags) & syscall.O_ACCMODE
	wantRead := acc == syscall.O_RDONLY || acc == syscall.O_RDWR
	wantWrite := acc == syscall.O_WRONLY || acc == syscall.O_RDWR
	if (wantRead && e.read == nil) || (wantWrite && e.write == nil) {
		return nil, 0, syscall.EACCES
	}
	h := &attrHandle{write: e.write}
	if wantRead {
		h.data = e.read()
	}
	return h, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES, 0
}

// attrHandle is an open attribute: its content as of the open, and its
// store. Each write(2) is one store, whatever the offset, as in sysfs.
type attrHandle struct {
	data  []byte
	write func([]byte) syscall.Errno
}

var (
	_ fs.FileReader = (*attrHandle)(nil)
	_ fs.FileWriter = (*attrHandle)(nil)
)

func (h *attrHandle) Read(_ context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(int64(len(h.data)), off+int64(len(dest)))
	return fuse.ReadResultData(h.data[off:end]), 0
}

func (h *attrHandle) Write(_ context.Context, data []byte, _ int64) (uint32, syscall.Errno) {
	if len(data) == 0 {
		return 0, 0
	}
	if errno := h.write(append([]byte(nil), data...)); errno != 0 {
		return 0, errno
	}
	return uint32(len(data)), 0
}

// vfioNode is the root of the fake /dev/vfio, or one file in it: the
// container device `vfio`, or a group. A second open of a group is EBUSY;
// a device fd taken through an open group (VFIO_GROUP_GET_DEVICE_FD)
// holds the device until that open file is closed (see Kernel, "VFIO").
type vfioNode struct {
	fs.Inode
	k     *Kernel
	name  string // "" for the directory
	group int
}

var (
	_ fs.NodeLookuper  = (*vfioNode)(nil)
	_ fs.NodeReaddirer = (*vfioNode)(nil)
	_ fs.NodeGetattrer = (*vfioNode)(nil)
	_ fs.NodeSetattrer = (*vfioNode)(nil)
	_ fs.NodeOpener    = (*vfioNode)(nil)
)

func (n *vfioNode) attr(a *fuse.Attr) syscall.Errno {
	switch n.name {
	case "":
		a.Mode = fuse.S_IFDIR | 0o755
	case "vfio":
		n.k.mu.Lock()
		a.Mode = fuse.S_IFREG | n.k.vfioMod
		n.k.mu.Unlock()
	default:
		if !n.exists() {
			return syscall.ENOENT
		}
		a.Mode = fuse.S_IFREG | 0o600
	}
	a.Ino = inoOf("vfio/"+n.name, 0)
	a.Nlink = 1
	return 0
}

func (n *vfioNode) exists() bool {
	for _, g := range n.k.vfioGroups() {
		if g == n.group {
			return true
		}
	}
	return false
}

func (n *vfioNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.name != "" {
		return nil, syscall.ENOTDIR
	}
	c := &vfioNode{k: n.k, name: name}
	if name != "vfio" {
		g, err := strconv.Atoi(name)
		if err != nil || strconv.Itoa(g) != name {
			return nil, syscall.ENOENT
		}
		c.group = g
	}
	if errno := c.attr(&out.Attr); errno != 0 {
		return nil, errno
	}
	return n.NewInode(ctx, c, fs.StableAttr{Mode: out.Mode, Ino: out.Ino}), 0
}

func (n *vfioNode) Readdir(context.Context) (fs.DirStream, syscall.Errno) {
	out := []fuse.DirEntry{{Name: "vfio", Mode: fuse.S_IFREG}}
	for _, g := range n.k.vfioGroups() {
		out = append(out, fuse.DirEntry{Name: strconv.Itoa(g), Mode: fuse.S_IFREG})
	}
	return fs.NewListDirStream(out), 0
}

func (n *vfioNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return n.attr(&out.Attr)
}

// Setattr keeps a chmod of the container device (the provider makes it
// world read-writable in every node); sizes are ignored.
func (n *vfioNode) Setattr(_ context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if m, ok := in.GetMode(); ok && n.name == "vfio" {
		n.k.mu.Lock()
		n.k.vfioMod = m & 0o7777
		n.k.saveLocked()
		n.k.mu.Unlock()
	}
	return n.attr(&out.Attr)
}

func (n *vfioNode) Open(context.Context, uint32) (fs.FileHandle, uint32, syscall.Errno) {
	switch n.name {
	case "":
		return nil, 0, syscall.EISDIR
	case "vfio":
		return &containerHandle{}, fuse.FOPEN_DIRECT_IO, 0
	}
	gen, errno := n.k.OpenGroup(n.group)
	if errno != 0 {
		return nil, 0, errno
	}
	return &groupHandle{k: n.k, group: n.group, gen: gen}, fuse.FOPEN_DIRECT_IO, 0
}

// containerHandle is an open fake /dev/vfio/vfio: writes are ignored (as
// before), and the container ioctls a VFIO user makes before it asks for a
// device succeed. The fake cannot see which groups the caller attached (the
// group's VFIO_GROUP_SET_CONTAINER passes the container fd by pointer, which
// a FUSE server cannot read), so VFIO_SET_IOMMU is not checked against them.
type containerHandle struct{}

var (
	_ fs.FileWriter  = (*containerHandle)(nil)
	_ fs.FileIoctler = (*containerHandle)(nil)
)

func (*containerHandle) Write(_ context.Context, data []byte, _ int64) (uint32, syscall.Errno) {
	return uint32(len(data)), 0
}

func (*containerHandle) Ioctl(_ context.Context, cmd uint32, arg uint64, _, _ []byte) (int32, syscall.Errno) {
	switch cmd {
	case vfiouser.GetAPIVersion:
		return vfiouser.APIVersion, 0
	case vfiouser.CheckExtension:
		if arg == vfiouser.Type1IOMMU || arg == vfiouser.Type1v2IOMMU {
			return 1, 0
		}
		return 0, 0
	case vfiouser.SetIOMMU:
		if arg == vfiouser.Type1IOMMU || arg == vfiouser.Type1v2IOMMU {
			return 0, 0
		}
		return 0, syscall.EINVAL
	}
	return 0, syscall.ENOTTY
}

// groupHandle is an open fake VFIO group. VFIO_GROUP_GET_DEVICE_FD on it
// holds the group's device until the handle is released (the fake's model
// of the device fd, see Kernel); its release lets blocked unbinds proceed.
type groupHandle struct {
	k     *Kernel
	group int
	gen   int // the group's generation when opened (Kernel.OpenGroup)
	once  sync.Once

	mu        sync.Mutex
	container bool // VFIO_GROUP_SET_CONTAINER done
	devices   int  // device fds taken through this open file
}

var (
	_ fs.FileReleaser = (*groupHandle)(nil)
	_ fs.FileIoctler  = (*groupHandle)(nil)
)

func (h *groupHandle) Ioctl(_ context.Context, cmd uint32, _ uint64, _, _ []byte) (int32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch cmd {
	case vfiouser.GroupSetContainer:
		if h.container {
			return 0, syscall.EINVAL // vfio_group_set_container: already set
		}
		h.container = true
		return 0, 0
	case vfiouser.GroupUnsetContainer:
		switch {
		case !h.container:
			return 0, syscall.EINVAL
		case h.devices > 0:
			return 0, syscall.EBUSY // a device still uses the container
		}
		h.container = false
		return 0, 0
	case vfiouser.GroupGetDeviceFD:
		if !h.container {
			// vfio_device_assign_container: no container (or no IOMMU
			// set in it) is EINVAL.
			return 0, syscall.EINVAL
		}
		if errno := h.k.GetDevice(h.group); errno != 0 {
			return 0, errno
		}
		h.devices++
		// No new fd can be made here: 0 says "the device fd is this open
		// file" (a real kernel never returns 0, stdin's number, for it).
		return 0, 0
	}
	return 0, syscall.ENOTTY
}

func (h *groupHandle) Release(context.Context) syscall.Errno {
	h.once.Do(func() {
		h.mu.Lock()
		n := h.devices
		h.mu.Unlock()
		h.k.CloseGroup(h.group, h.gen, n)
	})
	return 0
}
