package sriov_test

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

func TestDiscover(t *testing.T) {
	r := slotRig(t, 3)
	// PF 1 carries a global address: the host uses it.
	l, err := netlink.LinkByName(r.State.PFs[1].Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("198.51.100.7"), Mask: net.CIDRMask(32, 32)}}); err != nil {
		t.Fatal(err)
	}
	pfs, err := sriov.Discover(sriov.Sysfs{Root: r.State.SysfsRoot})
	if err != nil {
		t.Fatal(err)
	}
	if len(pfs) != 3 {
		t.Fatalf("discovered %d PFs, want 3: %+v", len(pfs), pfs)
	}
	for i, pf := range pfs {
		want := r.State.PFs[i]
		if pf.PCI != want.BDF || pf.Name != want.Name || pf.MAC != want.MAC || !pf.Present {
			t.Errorf("PF %d = %+v, want name %s pci %s mac %s present", i, pf, want.Name, want.BDF, want.MAC)
		}
		if pf.TotalVFs != 8 || pf.NumVFs != 0 || pf.Driver != "i40e" || pf.Vendor != "0x8086" || pf.Device != "0x1572" {
			t.Errorf("PF %d attributes = %+v", i, pf)
		}
		if pf.GlobalAddress != (i == 1) {
			t.Errorf("PF %d GlobalAddress = %v", i, pf.GlobalAddress)
		}
	}
	if ok, _ := (sriov.Selection{}).Allows(pfs[1]); ok {
		t.Error("a PF with a global address must not be chosen unless included")
	}
	if ok, _ := (sriov.Selection{Include: []string{"*"}}).Allows(pfs[1]); ok {
		t.Error("a glob include took the PF with a global address")
	}
	for _, exact := range []string{pfs[1].Name, pfs[1].PCI} {
		if ok, why := (sriov.Selection{Include: []string{exact}}).Allows(pfs[1]); !ok {
			t.Errorf("include %q did not take the PF with a global address: %s", exact, why)
		}
	}

	// A PF moved out of this netns stays listed, not present.
	ns := targetNetns(t, r, "disc")
	moveLinkTo(t, r.State.PFs[2].MAC, string(ns))
	pfs, err = sriov.Discover(sriov.Sysfs{Root: r.State.SysfsRoot})
	if err != nil {
		t.Fatal(err)
	}
	if len(pfs) != 3 || pfs[2].Present || pfs[2].PCI != r.State.PFs[2].BDF {
		t.Fatalf("after moving PF 2 away: %+v", pfs)
	}
}
