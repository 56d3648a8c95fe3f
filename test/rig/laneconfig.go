package rig

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/standin/rigsysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// maxAgents keeps a rig lane small: stand-in nodes are cheap, but every
// agent is a container on a 2-core machine shared by several engineers.
const maxAgents = 4

const laneHeader = `# Lane config for the test rig in %s (written by lane-rig up).
# The fake sysfs is mounted into every agent at the same path, so paths
# recorded in it resolve the same inside and outside the nodes, and again at
# %s, where the stand-ins of the device plugin and
# sriov-cni look for it (test/standin/rigsysfs; no product code knows it).
# imageRegistryMirror is the rig's registry (make test-env), serving the
# component images under their upstream names: built from upstream Go
# modules where they are served, stand-ins from test/standin otherwise.
`

// laneConfig is the lane the rig's PFs are meant for.
func laneConfig(dir string, s *State) *config.Lane {
	agents := len(s.PFs)
	if agents > maxAgents {
		agents = maxAgents
	}
	names := make([]string, len(s.PFs))
	for i, pf := range s.PFs {
		names[i] = pf.Name
	}
	f := false
	return &config.Lane{
		APIVersion: config.APIVersion,
		Kind:       config.Kind,
		Name:       "rig-" + s.Prefix,
		Agents:     agents,
		PFsPerNode: len(s.PFs) / agents,
		K3sImage:   testutil.StandinK3sImage,
		ToolsImage: testutil.StandinToolsImage,
		SysfsRoot:  s.SysfsRoot,
		VFIODir:    s.VFIODir,
		StateDir:   filepath.Join(dir, laneStateDir),
		// The second mount is for pods: the device plugin's has the node's
		// /var/log, Multus's daemon the node's / (test/standin/rigsysfs).
		Volumes: []string{
			s.SysfsRoot + ":" + s.SysfsRoot + "@agent:*",
			s.SysfsRoot + ":" + rigsysfs.NodePath + "@agent:*",
		},
		Registry: config.Registry{Enabled: &f},

		ImageRegistryMirror: s.ImageMirror,
		PFs:                 config.PFSelect{Include: names},
	}
}

func writeLaneConfig(dir string, s *State) error {
	b, err := yaml.Marshal(laneConfig(dir, s))
	if err != nil {
		return fmt.Errorf("encoding rig lane config: %w", err)
	}
	// The struct has no omitempty on most fields; drop the zero values so
	// the file shows only what the rig sets and the lane's defaults apply.
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("re-reading rig lane config: %w", err)
	}
	prune(m)
	if b, err = yaml.Marshal(m); err != nil {
		return fmt.Errorf("encoding rig lane config: %w", err)
	}
	out := append([]byte(fmt.Sprintf(laneHeader, dir, rigsysfs.NodePath)), b...)
	if err := os.WriteFile(filepath.Join(dir, LaneFile), out, 0o644); err != nil {
		return fmt.Errorf("writing rig lane config: %w", err)
	}
	return nil
}

// prune removes zero values ("", 0, "0s", null, empty maps and lists) but
// keeps false, which the rig sets on purpose.
func prune(m map[string]any) bool {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case string:
			if x == "" || x == "0s" {
				delete(m, k)
			}
		case float64:
			if x == 0 {
				delete(m, k)
			}
		case []any:
			if len(x) == 0 {
				delete(m, k)
			}
		case map[string]any:
			if prune(x) {
				delete(m, k)
			}
		}
	}
	return len(m) == 0
}
