package fleet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// On the rig, as the kernel leaves them after a job's pod netns died
// without its CNI DEL: one PF back in the host's netns under the name the
// pod gave it, its alias the host's name, with two VFs the job made;
// another still in a netns that outlives its pod; and an address with no
// device. PFs says so; Return renames the first back and removes its
// VFs, leaves the second, and PFs then finds the first free.
func TestPFsAndReturn(t *testing.T) {
	testutil.RequireRoot(t)
	r := rig.NewForTest(t, 2, testutil.TakeSlot(t).RigPrefix())
	sys := sriov.Sysfs{Root: r.State.SysfsRoot}
	back, away := r.State.PFs[0], r.State.PFs[1]
	podName := r.State.Prefix + "n1"

	l, err := netlink.LinkByName(back.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetAlias(l, back.Name); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetName(l, podName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever the test left: the rig takes its PF down by its name.
		if l, err := netlink.LinkByName(podName); err == nil {
			_ = netlink.LinkSetName(l, back.Name)
		}
	})
	if err := os.WriteFile(filepath.Join(sys.Device(back.BDF), "sriov_numvfs"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}

	ns := nsutil.ForTest(t, r.State.Prefix+"-job")
	al, err := netlink.LinkByName(away.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(al, int(ns)); err != nil {
		t.Fatal(err)
	}
	// Back before the netns goes (cleanups run last first): a veth dies
	// with its netns where a physical PF would come home.
	t.Cleanup(func() {
		if err := nsutil.Do(ns, func() error {
			l, err := netlink.LinkByName(away.Name)
			if err != nil {
				return err
			}
			return netlink.LinkSetNsPid(l, 1)
		}); err != nil {
			t.Errorf("returning %s from the job's netns: %v", away.Name, err)
		}
	})

	const nowhere = "0000:99:00.0"
	rep, err := PFs(sys, []string{back.BDF, away.BDF, nowhere})
	if err != nil {
		t.Fatal(err)
	}
	want := []PFReport{
		{PCI: back.BDF, Name: podName, Alias: back.Name, Driver: rep[0].Driver, NumVFs: 2, State: StateReturn, Problems: rep[0].Problems},
		{PCI: away.BDF, Driver: rep[1].Driver, State: StateAway},
		{PCI: nowhere, State: StateGone},
	}
	if len(rep) != 3 || len(rep[0].Problems) != 2 || rep[0].Driver == "" || !slices.EqualFunc(rep, want, samePF) {
		t.Fatalf("PFs:\n got %+v\nwant %+v (and two problems)", rep, want)
	}

	ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(time.Minute))
	defer cancel()
	did, err := Return(ctx, sriov.Restorer{Sysfs: sys}, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(did) != 2 {
		t.Errorf("Return did %q, want a rename and a VF removal", did)
	}
	rep, err = PFs(sys, []string{back.BDF, away.BDF})
	if err != nil {
		t.Fatal(err)
	}
	if rep[0].State != StateFree || rep[0].Name != back.Name || rep[0].Alias != "" || rep[0].NumVFs != 0 || rep[1].State != StateAway {
		t.Errorf("after Return: %+v", rep)
	}
	if l, err := netlink.LinkByName(back.Name); err != nil || l.Attrs().Flags&net.FlagUp != 0 {
		t.Errorf("%s after Return: %v, flags %v: want it down, as host-device's DEL leaves it", back.Name, err, l)
	}
}

func samePF(a, b PFReport) bool {
	return a.PCI == b.PCI && a.Name == b.Name && a.Alias == b.Alias && a.Driver == b.Driver && a.NumVFs == b.NumVFs && a.State == b.State &&
		slices.Equal(a.Problems, b.Problems)
}
