package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// hashLabel holds an image's content key: an image whose label matches
// the key of its inputs is not built again.
const hashLabel = "io.sriov-lane.standin.content-hash"

// busyboxPath is Debian's busybox-static, hack/test-env.sh installs it.
const busyboxPath = "/bin/busybox"

// fileSpec puts the file src (symlinks followed) at dest in an image.
type fileSpec struct{ src, dest string }

// imageSpec is a FROM-scratch stand-in image: a root filesystem of
// busybox, links and files, and Dockerfile lines after the common head.
type imageSpec struct {
	tag       string
	body      string // Dockerfile lines after FROM, COPY and ENV PATH
	k3sLinks  string // names in /bin linked to k3s, space-separated
	noBusybox bool
	// links are PATH=TARGET symlinks, space-separated; the string enters
	// the key as written.
	links string
	files []fileSpec
}

// imager builds imageSpecs through the Docker API.
type imager struct {
	docker  *client.Client
	log     log.Logger
	sums    fileSums
	force   bool     // rebuild even when the label matches (SRIOV_LANE_FORCE_IMAGES=1)
	applets []string // busybox --list, sorted
	builds  int
}

func newImager(docker *client.Client, logger log.Logger, force bool) (*imager, error) {
	out, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", busyboxPath, err)
	}
	applets := strings.Fields(string(out))
	slices.Sort(applets)
	return &imager{docker: docker, log: logger, sums: fileSums{}, force: force, applets: applets}, nil
}

// key of s: its Dockerfile body, links, busybox (content and applets) and
// the content of every file at its destination, in the lines and order
// hack/test-env.sh hashed, so images it built stay current.
func (m *imager) key(s imageSpec) (string, error) {
	k := newKey()
	k.line(s.body)
	k.line(s.k3sLinks)
	if s.noBusybox {
		k.line("no busybox")
	}
	if s.links != "" {
		k.line(s.links)
	}
	bb, err := m.sums.of(busyboxPath)
	if err != nil {
		return "", err
	}
	k.line(bb)
	for _, f := range s.files {
		sum, err := m.sums.of(f.src)
		if err != nil {
			return "", fmt.Errorf("image %s: %w", s.tag, err)
		}
		k.line(f.dest + " " + sum)
	}
	for _, a := range m.applets {
		k.line(a)
	}
	return k.sum(), nil
}

// ensure builds s unless the image under its tag carries its key.
func (m *imager) ensure(ctx context.Context, s imageSpec) error {
	key, err := m.key(s)
	if err != nil {
		return err
	}
	old, _ := m.docker.ImageInspect(ctx, s.tag)
	if old.Config != nil && old.Config.Labels[hashLabel] == key && !m.force {
		m.log.V(0).Infof("%s up to date", s.tag)
		return nil
	}
	m.log.V(0).Infof("building image %s", s.tag)
	m.builds++
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(m.writeContext(pw, s, key)) }()
	resp, err := m.docker.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:           []string{s.tag},
		Version:        build.BuilderV1, // as DOCKER_BUILDKIT=0: no BuildKit session needed
		Remove:         true,
		SuppressOutput: true,
	})
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("building %s: %w", s.tag, err)
	}
	defer resp.Body.Close()
	if err := buildError(resp.Body); err != nil {
		return fmt.Errorf("building %s: %w", s.tag, err)
	}
	// The replaced image is dangling now; drop it unless a container uses
	// it. The build cache can hand back the very same image: only a
	// replaced one (now untagged) may go.
	now, err := m.docker.ImageInspect(ctx, s.tag)
	if err != nil {
		return fmt.Errorf("inspecting %s after its build: %w", s.tag, err)
	}
	if old.ID != "" && old.ID != now.ID {
		if _, err := m.docker.ImageRemove(ctx, old.ID, image.RemoveOptions{}); err != nil {
			m.log.Warnf("replaced image %s of %s not removed: %v", old.ID, s.tag, err)
		}
	}
	return nil
}

// buildError reads the build's JSON message stream to its end and returns
// the error it reports, if any.
func buildError(r io.Reader) error {
	dec := json.NewDecoder(r)
	var stream strings.Builder
	for {
		var msg struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the build's output: %w", err)
		}
		stream.WriteString(msg.Stream)
		if msg.Error != "" {
			return errors.New(strings.TrimSpace(stream.String() + "\n" + msg.Error))
		}
	}
}

// rootfsDirs are made in every image, /tmp world-writable and sticky.
var rootfsDirs = []string{"bin", "tmp", "etc", "var/log", "run", "root", "output"}

// contextEntry is one entry of the build context's rootfs/.
type contextEntry struct {
	mode   int64
	link   string // a symlink to this when set
	src    string // a file copied from here when set
	data   string // else a file holding this
	isFile bool
}

// writeContext writes s's build context as a tar stream: Dockerfile and
// rootfs/, which it COPYs to /. Files are root's, as COPY makes them,
// with the permissions cp gives a copy (the source's, less umask 022).
func (m *imager) writeContext(w io.Writer, s imageSpec, key string) error {
	entries := map[string]contextEntry{}
	var order []string
	dirs := map[string]bool{}
	var mkdirAll func(string)
	mkdirAll = func(d string) {
		if d == "." || d == "/" || d == "" || dirs[d] {
			return
		}
		mkdirAll(path.Dir(d))
		dirs[d] = true
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		entries[d] = contextEntry{mode: mode}
		order = append(order, d)
	}
	put := func(p string, e contextEntry) {
		p = strings.TrimPrefix(path.Clean("/"+p), "/")
		mkdirAll(path.Dir(p))
		if _, ok := entries[p]; !ok {
			order = append(order, p)
		}
		entries[p] = e // a later entry replaces an earlier one, as ln -sf and cp do
	}
	for _, d := range rootfsDirs {
		mkdirAll(d)
	}
	if !s.noBusybox {
		fi, err := os.Stat(busyboxPath)
		if err != nil {
			return err
		}
		put("bin/busybox", contextEntry{isFile: true, src: busyboxPath, mode: int64(fi.Mode().Perm() &^ 0o022)})
		for _, a := range m.applets {
			if a != "busybox" {
				put("bin/"+a, contextEntry{link: "busybox"})
			}
		}
	}
	for _, a := range strings.Fields(s.k3sLinks) {
		put("bin/"+a, contextEntry{link: "k3s"})
	}
	for _, l := range strings.Fields(s.links) {
		p, target, _ := strings.Cut(l, "=")
		put(p, contextEntry{link: target})
	}
	put("etc/passwd", contextEntry{isFile: true, data: "root:x:0:0:root:/root:/bin/sh\n", mode: 0o644})
	put("etc/group", contextEntry{isFile: true, data: "root:x:0:\n", mode: 0o644})
	for _, f := range s.files {
		fi, err := os.Stat(f.src)
		if err != nil {
			return fmt.Errorf("image %s: %w", s.tag, err)
		}
		put(f.dest, contextEntry{isFile: true, src: f.src, mode: int64(fi.Mode().Perm() &^ 0o022)})
	}

	tw := tar.NewWriter(w)
	now := time.Now()
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin:/sbin:/usr/bin:/usr/sbin\n%s\nLABEL %s=%s\n", s.body, hashLabel, key)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: now}); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, dockerfile); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "rootfs/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now}); err != nil {
		return err
	}
	for _, p := range order {
		e := entries[p]
		name := "rootfs/" + p
		switch {
		case e.link != "":
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: e.link, Mode: 0o777, ModTime: now}); err != nil {
				return err
			}
		case !e.isFile:
			if err := tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: e.mode, ModTime: now}); err != nil {
				return err
			}
		case e.src == "":
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: e.mode, Size: int64(len(e.data)), ModTime: now}); err != nil {
				return err
			}
			if _, err := io.WriteString(tw, e.data); err != nil {
				return err
			}
		default:
			if err := copyIntoTar(tw, name, e); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func copyIntoTar(tw *tar.Writer, name string, e contextEntry) error {
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: e.mode, Size: fi.Size(), ModTime: time.Now()}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("copying %s into the build context: %w", e.src, err)
	}
	return nil
}

// removeDangling drops the images this replaced while a container still
// used them, once no container does (never forced).
func removeDangling(ctx context.Context, docker *client.Client) {
	imgs, err := docker.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("dangling", "true"), filters.Arg("label", hashLabel))})
	if err != nil {
		return
	}
	for _, img := range imgs {
		_, _ = docker.ImageRemove(ctx, img.ID, image.RemoveOptions{})
	}
}
