package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
)

// fakeKubelet is kubelet's registration service.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	reqs chan *pluginapi.RegisterRequest
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.reqs <- r
	return &pluginapi.Empty{}, nil
}

func write(t *testing.T, path, val string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(val), 0o644); err != nil {
		t.Fatalf("writing %s: %v", path, err)
	}
}

func TestPluginRegistersListsAndAllocatesLikeUpstream(t *testing.T) {
	dir := t.TempDir()
	sysRoot, pluginDir, devInfoDir := filepath.Join(dir, "sys"), filepath.Join(dir, "dp"), filepath.Join(dir, "devinfo")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The PF is matched to a link of this netns by MAC: borrow one.
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var pfLink netlink.Link
	for _, l := range links {
		if len(l.Attrs().HardwareAddr) == 6 && l.Attrs().HardwareAddr.String() != "00:00:00:00:00:00" {
			pfLink = l
			break
		}
	}
	if pfLink == nil {
		t.Skip("no link with a MAC in this netns to stand for the PF")
	}
	pfName := pfLink.Attrs().Name
	if err := sysfs.Build(sysRoot, []sysfs.PF{{Name: pfName, MAC: pfLink.Attrs().HardwareAddr.String()}}); err != nil {
		t.Fatal(err)
	}
	emu := sysfs.NewEmulator(sysfs.EmulatorConfig{Root: sysRoot})
	pf := filepath.Join(sysRoot, "bus", "pci", "devices", sysfs.PFBDF(0))
	write(t, filepath.Join(pf, "sriov_numvfs"), "2\n")
	emu.Sync()
	vf0, vf1 := sysfs.VFBDF(sysfs.PFBDF(0), 0), sysfs.VFBDF(sysfs.PFBDF(0), 1)
	// VF0 to vfio-pci as the lane binds VFs; VF1 stays a netdev (iavf).
	if d, err := os.Readlink(filepath.Join(sysRoot, "bus", "pci", "devices", vf0, "driver")); err == nil {
		write(t, filepath.Join(sysRoot, "bus", "pci", "drivers", filepath.Base(d), "unbind"), vf0)
		emu.Sync()
	}
	write(t, filepath.Join(sysRoot, "bus", "pci", "devices", vf0, "driver_override"), "vfio-pci")
	write(t, filepath.Join(sysRoot, "bus", "pci", "drivers", "vfio-pci", "bind"), vf0)
	emu.Sync()
	if d, err := os.Readlink(filepath.Join(sysRoot, "bus", "pci", "devices", vf1, "driver")); err != nil || filepath.Base(d) != "iavf" {
		write(t, filepath.Join(sysRoot, "bus", "pci", "devices", vf1, "driver_override"), "iavf")
		write(t, filepath.Join(sysRoot, "bus", "pci", "drivers_probe"), vf1)
		emu.Sync()
	}
	group, err := os.Readlink(filepath.Join(sysRoot, "bus", "pci", "devices", vf0, "iommu_group"))
	if err != nil {
		t.Fatalf("VF0 has no iommu_group: %v", err)
	}

	cfgFile := filepath.Join(dir, "config.json")
	write(t, cfgFile, `{"resourceList":[
	 {"resourceName":"sriov_vfio","selectors":{"drivers":["vfio-pci"],"pfNames":["`+pfName+`#0-3"]},"excludeTopology":true},
	 {"resourceName":"sriov_net","resourcePrefix":"example.com","selectors":[{"drivers":["iavf"]}]}]}`)

	kl := &fakeKubelet{reqs: make(chan *pluginapi.RegisterRequest, 4)}
	ln, err := net.Listen("unix", filepath.Join(pluginDir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ks := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(ks, kl)
	go func() { _ = ks.Serve(ln) }()
	defer ks.Stop()

	o, err := parseFlags([]string{"--log-dir=sriovdp", "--log-level=10", "--resource-prefix=kubevirt.io",
		"--config-file=" + cfgFile, "--sysfs-root=" + sysRoot, "--plugin-dir=" + pluginDir, "--devinfo-dir=" + devInfoDir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, o) }()

	got := map[string]string{}
	for len(got) < 2 {
		select {
		case r := <-kl.reqs:
			if r.Version != pluginapi.Version {
				t.Errorf("registration version %q", r.Version)
			}
			got[r.ResourceName] = r.Endpoint
		case err := <-done:
			t.Fatalf("plugin exited: %v", err)
		case <-ctx.Done():
			t.Fatalf("registrations: %v", got)
		}
	}
	want := map[string]string{"kubevirt.io/sriov_vfio": "kubevirt.io_sriov_vfio.sock", "example.com/sriov_net": "example.com_sriov_net.sock"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("registered %v, want %v", got, want)
		}
	}

	conn, err := grpc.NewClient("unix://"+filepath.Join(pluginDir, "kubevirt.io_sriov_vfio.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dp := pluginapi.NewDevicePluginClient(conn)
	stream, err := dp.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Devices) != 1 || list.Devices[0].ID != vf0 || list.Devices[0].Health != pluginapi.Healthy {
		t.Fatalf("ListAndWatch = %v, want only %s healthy", list.Devices, vf0)
	}

	resp, err := dp.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vf0}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := resp.ContainerResponses[0]
	if v := c.Envs["PCIDEVICE_KUBEVIRT_IO_SRIOV_VFIO"]; v != vf0 {
		t.Errorf("PCIDEVICE_KUBEVIRT_IO_SRIOV_VFIO = %q, want %s (envs %v)", v, vf0, c.Envs)
	}
	var paths []string
	for _, d := range c.Devices {
		paths = append(paths, fmt.Sprintf("%s:%s:%s", d.HostPath, d.ContainerPath, d.Permissions))
	}
	groupDev := "/dev/vfio/" + filepath.Base(group)
	if strings.Join(paths, " ") != "/dev/vfio/vfio:/dev/vfio/vfio:rw "+groupDev+":"+groupDev+":rw" {
		t.Errorf("device specs %v, want /dev/vfio/vfio and %s", paths, groupDev)
	}
	raw, err := os.ReadFile(filepath.Join(devInfoDir, "kubevirt.io-sriov_vfio-"+vf0+"-device.json"))
	if err != nil {
		t.Fatalf("device info file: %v", err)
	}
	var info struct {
		Type, Version string
		Pci           map[string]string
	}
	if err := json.Unmarshal(raw, &info); err != nil || info.Type != "pci" || info.Version != "1.1.0" || info.Pci["pci-address"] != vf0 {
		t.Errorf("device info %s (%v)", raw, err)
	}
	if _, err := dp.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vf1}}}}); err == nil {
		t.Errorf("allocating %s (not in the resource) succeeded", vf1)
	}

	// A VF that goes away leaves the list.
	write(t, filepath.Join(pf, "sriov_numvfs"), "0\n")
	emu.Sync()
	for {
		list, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Devices) == 0 {
			break
		}
	}
	cancel()
	<-done
}

func TestFlagsAreUpstreamsAndUnknownOnesFail(t *testing.T) {
	if _, err := parseFlags([]string{"--resource-prefix=kubevirt.io", "--config-file=/etc/pcidp/config.json", "--log-dir=sriovdp", "--log-level=10"}); err != nil {
		t.Errorf("upstream flags: %v", err)
	}
	for _, bad := range [][]string{{"--no-such"}, {"--use-cdi"}, {"positional"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
