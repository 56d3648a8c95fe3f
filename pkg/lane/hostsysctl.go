package lane

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

// OpHostSysctls journals the lane's share of the host sysctls its nodes'
// kubelets change.
//
// kubelet sets these at start, on the host: they are not namespaced, and
// every k3d or kind node's kubelet writes them (kubernetes/kubernetes
// pkg/kubelet/cm/container_manager_linux.go@v1.35.5 setupKernelTunables,
// values from k8s.io/component-helpers node/util/sysctl/sysctl.go@v0.35.5).
// The first lane up on a host records what they were; when the host's
// last lane goes down, each is put back if it still holds kubelet's value.
// One that something else changed meanwhile is left, and down says so.
const OpHostSysctls = "lane.host-sysctls"

// kubeletSysctls are the sysctls (paths under /proc/sys) and the values
// kubelet writes.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// hostSysctls is the host-wide record: the values before the first lane,
// and the lanes that hold the record.
type hostSysctls struct {
	Original map[string]string `json:"original"`
	Lanes    []string          `json:"lanes"`
}

// sysctlRecord is the journal data of OpHostSysctls.
type sysctlRecord struct {
	Lane     string `json:"lane"`
	StateDir string `json:"stateDir"`
}

// sysctlHost reads and writes the sysctls under Root (/proc/sys) and the
// record under the state dir.
type sysctlHost struct {
	Root     string
	StateDir string
}

func defaultSysctlHost(l *config.Lane) sysctlHost {
	return sysctlHost{Root: "/proc/sys", StateDir: l.StateDir}
}

func (h sysctlHost) recordPath() string { return statedir.Dir(h.StateDir).HostSysctls() }

func (h sysctlHost) read(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join(h.Root, key))
	return strings.TrimSpace(string(b)), err
}

// locked runs f holding the host-wide lock of the record.
func (h sysctlHost) locked(f func() error) error {
	if err := os.MkdirAll(h.StateDir, 0o755); err != nil {
		return err
	}
	lf, err := os.OpenFile(statedir.Dir(h.StateDir).HostSysctlsLock(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", lf.Name(), err)
	}
	return f()
}

func (h sysctlHost) load() (*hostSysctls, error) {
	b, err := os.ReadFile(h.recordPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r hostSysctls
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("reading %s: %w", h.recordPath(), err)
	}
	return &r, nil
}

func (h sysctlHost) save(r *hostSysctls) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(h.recordPath(), b, 0o644)
}

// hold adds lane to the record, first taking the current values when no
// lane holds it yet.
func (h sysctlHost) hold(lane string) error {
	return h.locked(func() error {
		r, err := h.load()
		if err != nil {
			return err
		}
		if r == nil {
			r = &hostSysctls{Original: map[string]string{}}
			for key := range kubeletSysctls {
				if v, err := h.read(key); err == nil {
					r.Original[key] = v
				}
			}
		}
		if !slices.Contains(r.Lanes, lane) {
			r.Lanes = append(r.Lanes, lane)
		}
		return h.save(r)
	})
}

// release drops lane from the record; the last lane out restores what
// kubelet changed. alive says whether another holder still exists (a lane
// removed by hand must not keep the values changed forever).
func (h sysctlHost) release(lane string, alive func(string) bool) (string, error) {
	var note string
	err := h.locked(func() error {
		r, err := h.load()
		if err != nil || r == nil {
			return err
		}
		var others []string
		for _, l := range r.Lanes {
			if l != lane && alive(l) {
				others = append(others, l)
			}
		}
		if len(others) > 0 {
			r.Lanes = others
			note = fmt.Sprintf("host sysctls left as they are: lanes %s are still up", strings.Join(others, ", "))
			return h.save(r)
		}
		var restored, left []string
		for _, key := range slices.Sorted(func(yield func(string) bool) {
			for k := range r.Original {
				if !yield(k) {
					return
				}
			}
		}) {
			orig := r.Original[key]
			cur, err := h.read(key)
			if err != nil || cur == orig {
				continue
			}
			if cur != kubeletSysctls[key] {
				left = append(left, fmt.Sprintf("%s is %s (was %s before the lanes, kubelet sets %s): changed by something else, left", sysctlName(key), cur, orig, kubeletSysctls[key]))
				continue
			}
			if err := os.WriteFile(filepath.Join(h.Root, key), []byte(orig), 0o644); err != nil {
				return fmt.Errorf("restoring %s to %s: %w", sysctlName(key), orig, err)
			}
			restored = append(restored, sysctlName(key)+"="+orig)
		}
		var parts []string
		if len(restored) > 0 {
			parts = append(parts, "restored host sysctls kubelet had changed: "+strings.Join(restored, ", "))
		}
		parts = append(parts, left...)
		note = strings.Join(parts, "; ")
		if err := os.Remove(h.recordPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
	return note, err
}

func sysctlName(key string) string { return strings.ReplaceAll(key, "/", ".") }

// recordHostSysctls journals the lane's hold on the host sysctls, before
// the cluster whose kubelets change them exists.
func recordHostSysctls(c *Session) error {
	e, err := c.Journal.Begin(OpHostSysctls, sysctlRecord{Lane: c.Lane.Name, StateDir: c.Lane.StateDir})
	if err != nil {
		return err
	}
	if err := defaultSysctlHost(c.Lane).hold(c.Lane.Name); err != nil {
		return fmt.Errorf("recording the host sysctls kubelet changes: %w", err)
	}
	return c.Journal.Done(e)
}
