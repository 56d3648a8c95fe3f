// Package statedir is the layout of sriov-lane's state directory (the lane
// setting stateDir, /var/lib/sriov-lane by default): where each lane keeps
// its journal, saved config, kubeconfig, reset's baseline, pinned network
// namespaces and machine-ids, and where the lanes of one host keep what
// they share (PF leases, the download cache, the host sysctls record).
// Every file and directory of that layout is named here and nowhere else
// (what the leases directory holds is pkg/sriov's business). Lanes an
// earlier sriov-lane made live in this layout: it must not change.
package statedir

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Dir is a state directory, shared by every lane that names it.
type Dir string

// Leases holds one lease file per leased PF, and the lock every lane takes
// to lease.
func (d Dir) Leases() string { return filepath.Join(string(d), "leases") }

// Cache holds verified downloads (Calico's pinned manifests).
func (d Dir) Cache() string { return filepath.Join(string(d), "cache") }

// HostSysctls is the record of the host sysctls kubelet changes, held by the
// lanes that are up.
func (d Dir) HostSysctls() string { return filepath.Join(string(d), "host-sysctls.json") }

// HostSysctlsLock is the lock taken to read or change HostSysctls.
func (d Dir) HostSysctlsLock() string { return filepath.Join(string(d), "host-sysctls.lock") }

// Lane is the directory of the lane called name.
func (d Dir) Lane(name string) LaneDir { return LaneDir(filepath.Join(string(d), "lanes", name)) }

// Lanes lists, sorted, the names of the lanes that exist in d.
func (d Dir) Lanes() ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(string(d), "lanes", "*", journalFile))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range matches {
		names = append(names, filepath.Base(filepath.Dir(m)))
	}
	sort.Strings(names)
	return names, nil
}

// LaneDir is one lane's directory, <stateDir>/lanes/<name>. Everything in it
// belongs to the lane alone and goes with it.
type LaneDir string

// journalFile is the journal's name in a lane's directory.
const journalFile = "journal.jsonl"

// Path is the directory itself.
func (d LaneDir) Path() string { return string(d) }

// Journal is the lane's write-ahead journal.
func (d LaneDir) Journal() string { return filepath.Join(string(d), journalFile) }

// HasJournal reports whether the lane's journal is there, which is what
// makes a lane exist: from the moment up creates its journal until down,
// having undone everything, removes it.
//
// Only a journal that can be seen counts: a caller that may not read the
// state dir (not root) must reach the check that tells it so, not be told
// the lane exists.
func (d LaneDir) HasJournal() bool {
	_, err := os.Stat(d.Journal())
	return err == nil
}

// SavedConfig is the resolved config up saved, so that commands acting on the
// lane later see exactly what up made.
func (d LaneDir) SavedConfig() string { return filepath.Join(string(d), "lane.yaml") }

// Baseline is what the cluster held when up finished (every namespace and
// cluster-scoped object), which reset returns the lane to.
func (d LaneDir) Baseline() string { return filepath.Join(string(d), "baseline.json") }

// Kubeconfig is where the lane's kubeconfig goes when none is asked for.
func (d LaneDir) Kubeconfig() string { return filepath.Join(string(d), "kubeconfig") }

// Pin is where the network namespace of the lane's agent is pinned for the
// lane's life.
func (d LaneDir) Pin(agent string) string { return filepath.Join(string(d), "netns", agent) }

// MachineIDs holds one machine-id file per node.
func (d LaneDir) MachineIDs() string { return filepath.Join(string(d), "machine-id") }

// MachineID is the file bind-mounted as /etc/machine-id into node.
func (d LaneDir) MachineID(node string) string { return filepath.Join(d.MachineIDs(), node) }

// NodeHooks holds the scripts k3d's entrypoint runs in every node before
// k3s starts (bind-mounted as /bin/k3d-entrypoint-*.sh).
func (d LaneDir) NodeHooks() string { return filepath.Join(string(d), "node-hooks") }

// Kubectl is k3s's multi-call binary taken from the server, named kubectl
// so that it acts as one.
func (d LaneDir) Kubectl() string { return filepath.Join(string(d), "bin", "kubectl") }

// KubectlData is where the lane's kubectl unpacks what it runs. k3s's
// binary, run as kubectl, first extracts its bundled data dir and runs the
// kubectl there (k3s-io/k3s cmd/k3s/main.go@v1.35.5+k3s1 runCLIs,
// stageAndRun, extract; read at 6a4781ad): into K3S_DATA_DIR when set, else
// /var/lib/rancher/k3s for root (findDataDir, datadir.Resolve). Here it is
// the lane's, removed with it, not a host directory a lane never recorded.
func (d LaneDir) KubectlData() string { return filepath.Join(string(d), "bin", "k3s-data") }

// Backup is where the lane keeps the file at the absolute path abs, which
// it replaced, until down puts it back.
func (d LaneDir) Backup(abs string) string {
	return filepath.Join(string(d), "backup-"+strings.ReplaceAll(strings.TrimPrefix(abs, "/"), "/", "_"))
}

// Holds reports whether the absolute path abs lies inside the lane's
// directory (and so goes with it).
func (d LaneDir) Holds(abs string) bool {
	return strings.HasPrefix(abs, string(d)+string(filepath.Separator))
}
