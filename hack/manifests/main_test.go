package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The committed manifests/ is exactly what the code renders: a change to
// pkg/cni that moves an object shows up as a diff a reviewer reads.
func TestManifestsUpToDate(t *testing.T) {
	files, err := render(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "manifests")
	haveNames, err := yamlFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wantNames []string
	for n := range files {
		wantNames = append(wantNames, n)
	}
	slices.Sort(wantNames)
	if !slices.Equal(haveNames, wantNames) {
		t.Errorf("manifests/ holds %v, the code renders %v: run make manifests", haveNames, wantNames)
	}
	for _, n := range wantNames {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		if !bytes.Equal(b, files[n]) {
			t.Errorf("manifests/%s differs from what pkg/cni renders: run make manifests and review the diff", n)
		}
	}
	// One file per component of both default lanes, and per optional one.
	for _, n := range []string{"flannel.yaml", "calico.yaml", "multus.yaml", "sriov-cni.yaml", "sriov-device-plugin.yaml", "network-resources-injector.yaml", "ci/fleet.yaml", "ci/job.yaml", "ci/prow-presubmit.yaml"} {
		if _, ok := files[n]; !ok {
			t.Errorf("no %s rendered", n)
		}
	}
}
