package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestVFAllocationSources: vfAllocation comes from the file, the flag,
// SRIOV_LANE_VF_ALLOCATION and kubevirtci's KUBEVIRT_USE_DRA, in the
// usual precedence, and kubevirtci's boolean maps to the setting's words.
func TestVFAllocationSources(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		flags      []string
		env        map[string]string
		want       string
	}{
		{name: "default", want: VFAllocationDevicePlugin},
		{name: "file", file: "vfAllocation: dra\n", want: VFAllocationDRA},
		{name: "KUBEVIRT_USE_DRA=true", env: map[string]string{"KUBEVIRT_USE_DRA": "true"}, want: VFAllocationDRA},
		{name: "KUBEVIRT_USE_DRA=false beats the file", file: "vfAllocation: dra\n", env: map[string]string{"KUBEVIRT_USE_DRA": "false"}, want: VFAllocationDevicePlugin},
		{name: "SRIOV_LANE_VF_ALLOCATION beats KUBEVIRT_USE_DRA", env: map[string]string{"KUBEVIRT_USE_DRA": "true", "SRIOV_LANE_VF_ALLOCATION": "devicePlugin"}, want: VFAllocationDevicePlugin},
		{name: "flag beats env", flags: []string{"--vf-allocation=dra"}, env: map[string]string{"KUBEVIRT_USE_DRA": "false"}, want: VFAllocationDRA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Source{Getenv: env(tc.env)}
			if tc.file != "" {
				src.File = writeFile(t, "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\n"+tc.file)
			}
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			src.Flags = AddFlags(fs)
			if err := fs.Parse(tc.flags); err != nil {
				t.Fatal(err)
			}
			l, err := Load(src)
			if err != nil {
				t.Fatal(err)
			}
			if l.VFAllocation != tc.want {
				t.Fatalf("vfAllocation = %q, want %q", l.VFAllocation, tc.want)
			}
		})
	}
}

// TestVFAllocationRefusals: what cannot work is refused before up
// touches the host, each error naming the field and the way out.
func TestVFAllocationRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{name: "unknown value", file: "vfAllocation: claims\n", want: []string{"vfAllocation", `"claims" is unknown`, "devicePlugin or dra"}},
		{name: "KUBEVIRT_USE_DRA not a kubevirtci boolean", env: map[string]string{"KUBEVIRT_USE_DRA": "yes"}, want: []string{"KUBEVIRT_USE_DRA", `"yes"`, `only "true" turns DRA on`}},
		{name: "k3s before 1.34", file: "vfAllocation: dra\nk3sImage: rancher/k3s:v1.33.4-k3s1\n", want: []string{"vfAllocation", "resource.k8s.io/v1", "Kubernetes 1.33", "1.34 or later"}},
		{name: "k3s before 1.34, + tag", file: "vfAllocation: dra\nk3sImage: mirror.local:5000/rancher/k3s:v1.31.2+k3s1\n", want: []string{"Kubernetes 1.31"}},
		{name: "with the injector", file: "vfAllocation: dra\ncomponents:\n  networkResourcesInjector: true\n", want: []string{"components.networkResourcesInjector", "kubevirt.io/sriov_net", "vfAllocation devicePlugin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Source{Getenv: env(tc.env)}
			if tc.file != "" {
				src.File = writeFile(t, "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\n"+tc.file)
			}
			_, err := Load(src)
			if err == nil || !IsInvalid(err) {
				t.Fatalf("want an invalid-config error, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

// TestVFAllocationDRAAccepted: dra with the default image, a 1.34 image,
// and an image whose tag says no version (up asks the API server then).
func TestVFAllocationDRAAccepted(t *testing.T) {
	for _, img := range []string{DefaultK3sImage, "rancher/k3s:v1.34.1-k3s1", "registry.local:5000/k3s@sha256:" + strings.Repeat("a", 64), "rancher/k3s:latest"} {
		p := writeFile(t, "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\nvfAllocation: dra\nk3sImage: "+img+"\n")
		if _, err := Load(Source{File: p}); err != nil {
			t.Errorf("k3sImage %s: %v", img, err)
		}
	}
}
