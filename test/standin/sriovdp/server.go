package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/sriov-lane/sriov-lane/test/standin/vfiodev"
)

// Upstream facts cited below are from
// k8snetworkplumbingwg/sriov-network-device-plugin at v3.11.0 unless
// another repository is named.

// watchEvery is resources/server.go rsWatchInterval: how often a plugin
// registered the deprecated way checks that its socket is still there.
var watchEvery = 5 * time.Second

// vfioCtl is the VFIO container device (infoprovider/vfioInfoProvider.go).
const vfioCtl = "/dev/vfio/vfio"

// poolDevice is a device of a pool with the state its info providers keep.
type poolDevice struct {
	*device
	// specsServed is set once the pool has returned the device's specs:
	// vfioInfoProvider remembers its container path then, and only then
	// reports it as "dev-mount" in the _INFO variable. Allocate computes
	// the variables before the specs (resources/server.go), so the first
	// allocation of a vfio-pci device has no "dev-mount"; later ones do.
	specsServed bool
}

// resourceServer is one pool's device plugin (resources/server.go).
type resourceServer struct {
	pluginapi.UnimplementedDevicePluginServer
	registerapi.UnimplementedRegistrationServer

	o           options
	rc          *resourceConfig
	prefix      string // the pool's prefix or --resource-prefix
	endpoint    string // socket name: <prefix>_<resourceName>.sock
	sockPath    string
	pluginWatch bool

	mu      sync.Mutex
	devices map[string]*poolDevice
	srv     *grpc.Server
	stopped chan struct{} // closed when the grpc server is stopped
}

func newResourceServer(o options, rc *resourceConfig, devs []*device, pluginWatch bool) *resourceServer {
	prefix := rc.prefix(o.resourcePrefix)
	endpoint := fmt.Sprintf("%s_%s.sock", prefix, rc.ResourceName)
	sockDir := o.pluginDir
	if pluginWatch {
		sockDir = o.registryDir
	}
	rs := &resourceServer{o: o, rc: rc, prefix: prefix, endpoint: endpoint,
		sockPath: filepath.Join(sockDir, endpoint), pluginWatch: pluginWatch, devices: map[string]*poolDevice{}}
	for _, d := range devs {
		rs.devices[d.bdf] = &poolDevice{device: d}
	}
	return rs
}

// resourceName is the extended resource: <prefix>/<resourceName>.
func (rs *resourceServer) resourceName() string { return rs.prefix + "/" + rs.rc.ResourceName }

// start cleans up, listens and, in the deprecated mode, registers with
// kubelet (resources/server.go Start). In the plugin-watcher mode kubelet
// finds the socket in its plugins_registry directory and asks GetInfo. A
// socket that cannot be listened on ends the plugin as upstream's main
// does on a failed startAllServers (returning, status 0); a refused or
// failed registration is a glog.Fatal there (status 2).
func (rs *resourceServer) start(ctx context.Context) error {
	_ = rs.cleanUp()
	l, err := net.Listen("unix", rs.sockPath)
	if err != nil {
		return returned("error starting resource servers error starting %s device plugin endpoint: %v", rs.rc.ResourceName, err)
	}
	srv := grpc.NewServer()
	if rs.pluginWatch {
		registerapi.RegisterRegistrationServer(srv, rs)
	}
	pluginapi.RegisterDevicePluginServer(srv, rs)
	stopped := make(chan struct{})
	rs.mu.Lock()
	rs.srv, rs.stopped = srv, stopped
	rs.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
	log.Printf("starting %s device plugin endpoint at: %s", rs.rc.ResourceName, rs.sockPath)
	if !rs.pluginWatch {
		if err := rs.register(ctx); err != nil {
			rs.stopServer()
			return fatalf("%w", err)
		}
	}
	return nil
}

func (rs *resourceServer) stopServer() {
	rs.mu.Lock()
	srv, stopped := rs.srv, rs.stopped
	rs.srv = nil
	rs.mu.Unlock()
	if srv != nil {
		close(stopped)
		srv.Stop()
	}
}

// stop is resources/server.go Stop: the server, the socket and the pool's
// device info files go.
func (rs *resourceServer) stop() {
	rs.stopServer()
	_ = rs.cleanUp()
}

// watch is resources/server.go Watch (deprecated mode only): kubelet
// removes every socket in its device-plugins directory when it starts, so
// a missing socket means a new kubelet to register with. A restart that
// fails is returned: upstream glog.Fatalf's.
func (rs *resourceServer) watch(ctx context.Context) error {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := os.Lstat(rs.sockPath); err == nil {
			continue
		}
		log.Printf("server endpoint not found %s; most likely Kubelet restarted", rs.endpoint)
		rs.stopServer()
		if err := rs.start(ctx); err != nil {
			return fatalf("unable to restart server %v", err)
		}
	}
}

func (rs *resourceServer) cleanUp() error {
	var errs []error
	if err := os.Remove(rs.sockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for id := range rs.devices {
		if err := os.Remove(rs.devInfoPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// register is the deprecated registration: a Register call to
// kubelet.sock in the device-plugins directory.
func (rs *resourceServer) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix:"+filepath.Join(rs.o.pluginDir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("%s device plugin unable connect to Kubelet: %w", rs.rc.ResourceName, err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     rs.endpoint,
		ResourceName: rs.resourceName(),
	})
	if err != nil {
		return fmt.Errorf("%s device plugin unable to register with Kubelet: %w", rs.rc.ResourceName, err)
	}
	log.Printf("%s device plugin registered with Kubelet", rs.rc.ResourceName)
	return nil
}

// GetInfo answers kubelet's plugin watcher.
func (rs *resourceServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.DevicePlugin,
		Name:              rs.resourceName(),
		Endpoint:          rs.sockPath,
		SupportedVersions: []string{"v1alpha1", "v1beta1"},
	}, nil
}

// NotifyRegistrationStatus: upstream stops its server when kubelet refuses
// the registration, and logs otherwise.
func (rs *resourceServer) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.PluginRegistered {
		log.Printf("Plugin: %s gets registered successfully at Kubelet", rs.endpoint)
	} else {
		log.Printf("Plugin: %s failed to be registered at Kubelet: %v; restarting.", rs.endpoint, st.Error)
		go rs.stopServer()
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (rs *resourceServer) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: false, GetPreferredAllocationAvailable: false}, nil
}

func (rs *resourceServer) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (rs *resourceServer) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// ListAndWatch sends the pool once: its devices were fixed when the plugin
// started and their health never changes (resources/pool_stub.go Probe is
// not implemented upstream), so nothing more is sent until the server
// stops. Devices are Healthy, with their NUMA node unless the pool has
// excludeTopology (devices/api.go, devices/host.go).
func (rs *resourceServer) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	rs.mu.Lock()
	resp := &pluginapi.ListAndWatchResponse{}
	for _, d := range rs.devices {
		dev := &pluginapi.Device{ID: d.bdf, Health: pluginapi.Healthy}
		if d.numaNode >= 0 {
			dev.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.numaNode)}}}
		}
		resp.Devices = append(resp.Devices, dev)
	}
	stopped := rs.stopped
	rs.mu.Unlock()
	sort.Slice(resp.Devices, func(i, j int) bool { return resp.Devices[i].ID < resp.Devices[j].ID })
	if err := stream.Send(resp); err != nil {
		return err
	}
	select {
	case <-stream.Context().Done():
	case <-stopped:
	}
	return nil
}

// envName is the allocation's variable (resources/pool_stub.go GetEnvs):
// "PCIDEVICE_<prefix>_<resourceName>", upper-cased, with '.' (and only '.')
// as '_': kubevirt.io/sriov_net is PCIDEVICE_KUBEVIRT_IO_SRIOV_NET, and a
// '-' in the prefix or name stays. The same name plus "_INFO" holds the
// info providers' values per device as JSON.
func envName(prefix, resourceName string) string {
	return strings.ToUpper(strings.ReplaceAll(fmt.Sprintf("PCIDEVICE_%s_%s", prefix, resourceName), ".", "_"))
}

// Allocate answers as resources/server.go Allocate does, in its order:
// the variables (PCIDEVICE_* with the PCI addresses, comma-separated, and
// PCIDEVICE_*_INFO), then the device specs (netdevice/netResourcePool.go
// GetDeviceSpecs: for a vfio-pci device /dev/vfio/vfio and /dev/vfio/<iommu
// group>, each host path once), no mounts, then the device info files.
//
// The stand-in's one departure: the rig has no VFIO character devices (its
// /dev/vfio holds regular files served by FUSE) and the container runtime
// refuses a device spec whose host path is not a device. So the host paths
// are character devices the stand-in makes itself under vfioDevDir (a
// directory the product's plugin pod has as a hostPath), with /dev/null's
// major and minor, while the container paths are upstream's: the pod sees
// /dev/vfio/vfio and /dev/vfio/<group>, and opening them opens /dev/null.
func (rs *resourceServer) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	resp := &pluginapi.AllocateResponse{}
	for _, creq := range req.ContainerRequests {
		cresp := &pluginapi.ContainerAllocateResponse{Envs: rs.envs(creq.DevicesIds)}
		specs, err := rs.deviceSpecs(creq.DevicesIds)
		if err != nil {
			return nil, err
		}
		cresp.Devices = specs
		cresp.Mounts = []*pluginapi.Mount{}
		if err := rs.storeDeviceInfo(creq.DevicesIds); err != nil {
			return nil, err
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cresp)
	}
	log.Printf("AllocateResponse send: %+v", resp)
	return resp, nil
}

// envs is resources/pool_stub.go GetEnvs; devices not in the pool are
// skipped there (Allocate fails later, in storeDeviceInfo).
func (rs *resourceServer) envs(ids []string) map[string]string {
	infos := map[string]map[string]map[string]string{}
	var list []string
	for _, id := range ids {
		d, ok := rs.devices[id]
		if !ok {
			continue
		}
		list = append(list, id)
		info := map[string]map[string]string{"generic": {"deviceID": id}}
		if d.driver == "vfio-pci" {
			v := map[string]string{"mount": vfioCtl}
			if d.specsServed && d.iommuGroup != "" {
				v["dev-mount"] = "/dev/vfio/" + d.iommuGroup
			}
			info["vfio"] = v
		}
		if rs.rc.AdditionalInfo != nil {
			// infoprovider/extraInfoProvider.go: "*" first, then the
			// device's own address overriding it.
			extra := map[string]string{}
			for _, k := range []string{"*", id} {
				for key, val := range rs.rc.AdditionalInfo[k] {
					extra[key] = val
				}
			}
			info["extra"] = extra
		}
		infos[id] = info
	}
	name := envName(rs.prefix, rs.rc.ResourceName)
	b, _ := json.Marshal(infos)
	return map[string]string{name: strings.Join(list, ","), name + "_INFO": string(b)}
}

func (rs *resourceServer) deviceSpecs(ids []string) ([]*pluginapi.DeviceSpec, error) {
	specs := []*pluginapi.DeviceSpec{}
	add := func(s *pluginapi.DeviceSpec) {
		for _, have := range specs {
			if have.HostPath == s.HostPath {
				return
			}
		}
		specs = append(specs, s)
	}
	for _, id := range ids {
		d, ok := rs.devices[id]
		if !ok || d.driver != "vfio-pci" {
			continue
		}
		ctl, err := vfiodev.Node(rs.o.vfioDevDir, rs.o.devNull, "vfio")
		if err != nil {
			return nil, err
		}
		add(&pluginapi.DeviceSpec{HostPath: ctl, ContainerPath: vfioCtl, Permissions: "rw"})
		if d.iommuGroup == "" {
			log.Printf("GetDeviceSpecs(): error getting vfio device file for device: %s: no iommu_group", id)
			continue
		}
		hostName := d.iommuGroup
		if d.noIOMMU {
			hostName = "noiommu-" + d.iommuGroup
		}
		group, err := vfiodev.Node(rs.o.vfioDevDir, rs.o.devNull, hostName)
		if err != nil {
			return nil, err
		}
		add(&pluginapi.DeviceSpec{HostPath: group, ContainerPath: "/dev/vfio/" + d.iommuGroup, Permissions: "rw"})
		d.specsServed = true
	}
	return specs, nil
}

// devInfoPath is where the device info file of id lives
// (k8snetworkplumbingwg/network-attachment-definition-client
// pkg/utils/cniconfig.go@v1.7.7 getDPDeviceInfoPath):
// <dir>/<prefix>-<resourceName>-<PCI address>-device.json, each '/' as '-'.
func (rs *resourceServer) devInfoPath(id string) string {
	return filepath.Join(rs.o.devInfoDir, fmt.Sprintf("%s-%s-device.json",
		strings.ReplaceAll(rs.resourceName(), "/", "-"), strings.ReplaceAll(id, "/", "-")))
}

// storeDeviceInfo is netdevice/netResourcePool.go StoreDeviceInfoFile:
// for each device, remove the old file and write
// {"type":"pci","version":"1.1.0","pci":{"pci-address":...}} read-only
// (network-attachment-definition-client saveDeviceInfo@v1.7.7, mode 0444).
func (rs *resourceServer) storeDeviceInfo(ids []string) error {
	for _, id := range ids {
		if _, ok := rs.devices[id]; !ok {
			return fmt.Errorf("storeDeviceInfoFile: Only pciNetDevices are supported (%s is not a device of %s)", id, rs.resourceName())
		}
		p := rs.devInfoPath(id)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// saveDeviceInfo makes a missing directory with os.ModeDir as
		// its mode, no permission bits (the product's hostPath volume
		// makes it first, DirectoryOrCreate).
		if err := os.MkdirAll(filepath.Dir(p), os.ModeDir); err != nil {
			return err
		}
		b, err := json.Marshal(deviceInfo{Type: "pci", Version: "1.1.0", Pci: &pciDevice{PciAddress: id}})
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o444); err != nil {
			return err
		}
	}
	return nil
}

// deviceInfo and pciDevice are the JSON of
// network-attachment-definition-client
// pkg/apis/k8s.cni.cncf.io/v1/types.go@v1.7.7 DeviceInfo and PciDevice
// (the fields a PCI netdevice pool fills).
type deviceInfo struct {
	Type    string     `json:"type,omitempty"`
	Version string     `json:"version,omitempty"`
	Pci     *pciDevice `json:"pci,omitempty"`
}

type pciDevice struct {
	PciAddress   string `json:"pci-address,omitempty"`
	Vhostnet     string `json:"vhost-net,omitempty"`
	RdmaDevice   string `json:"rdma-device,omitempty"`
	PfPciAddress string `json:"pf-pci-address,omitempty"`
}
