package lane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// The provider file is sourced by kubevirtci's shell: hostile paths must
// come through as data, never as code.
func TestKubevirtciProviderConfigIsSafeToSource(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "it's $(touch pwned) `x`", ".kubeconfig")
	l := config.Default()
	body := kubevirtciProviderConfig(l, kc, "/k/.kubectl")
	script := filepath.Join(dir, "p.sh")
	os.WriteFile(script, []byte(body), 0o644)
	cmd := exec.Command("bash", "-c", `cd "$1" && . ./p.sh && printf '%s|%s|%s|%s' "$kubeconfig" "$kubectl" "$docker_prefix" "$manifest_docker_prefix"`, "_", dir)
	// A DOCKER_PREFIX in the caller's environment would override the file's.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if string(out) != kc+"|/k/.kubectl|localhost:5000/kubevirt|registry:5000/kubevirt" {
		t.Fatalf("sourced values %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("sourcing the provider file ran code from a path")
	}
}

func TestCNIOptionsFromLane(t *testing.T) {
	l := config.Default()
	l.NodeLabel = "example.com/sriov=yes"
	l.VFDriver = config.VFDriverNetdevice
	l.ImageRegistryMirror = "mirror.local:5000"
	o := CNIOptions(l, []string{"ens1f0", "ens2f0"})
	if o.NodeSelectorKey != "example.com/sriov" || o.NodeSelectorValue != "yes" || o.VFDriver != "netdevice" ||
		o.ImageRegistryMirror != "mirror.local:5000" || o.Resource() != "kubevirt.io/sriov_net" || len(o.PFNames) != 2 {
		t.Fatalf("%+v", o)
	}
}

func TestPlacementsFromJournalSkipUndoneAndVFs(t *testing.T) {
	j, err := journal.Open(filepath.Join(t.TempDir(), "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	pf := sriov.MoveRecord{What: "PF", PCI: "0000:3b:00.0", MAC: "aa:bb:cc:dd:ee:01", Name: "ens1f0", MovedAs: "ens1f0",
		Target: sriov.TargetSpec{Kind: "container", ID: "abc", Name: "k3d-sriov-agent-0"}, TargetDesc: "k3d-sriov-agent-0"}
	vf := pf
	vf.What, vf.PCI, vf.Name = "VF", "0000:3b:02.0", "ens1f0v0"
	gone := pf
	gone.PCI, gone.Name = "0000:3c:00.0", "ens2f0"
	for _, r := range []sriov.MoveRecord{pf, vf, gone} {
		if _, err := j.Begin(sriov.OpMove, r); err != nil {
			t.Fatal(err)
		}
	}
	j.MarkUndone(j.Pending()[0], "")
	got := PlacementsFromJournal(j.Entries())
	if len(got) != 1 || got[0].PF.Name != "ens1f0" || got[0].Node != "k3d-sriov-agent-0" || got[0].NameIn != "ens1f0" {
		t.Fatalf("%+v", got)
	}
}

func TestPreflightErrorPointsAtCheck(t *testing.T) {
	err := &PreflightError{Failed: []CheckResult{{Name: "pfs", Status: Fail, Message: "no SR-IOV PF", Hint: "get one"}}}
	if !IsPreflight(err) || !strings.Contains(err.Error(), "sriov-lane check") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatal(err)
	}
}
