package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/sriov-lane/sriov-lane/test/standin/devplugin"
)

// rescanEvery is how often sysfs is re-read; ListAndWatch sends a new list
// when a resource's devices change.
const rescanEvery = 2 * time.Second

// run serves every resource of the config until ctx ends, re-registering
// when kubelet restarts (its socket is re-created).
func run(ctx context.Context, o options) error {
	raw, err := os.ReadFile(o.configFile)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	cfg, err := devplugin.ParseConfig(raw)
	if err != nil {
		return err
	}
	scan := func() (map[string][]devplugin.Device, error) {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, fmt.Errorf("listing links: %w", err)
		}
		return devplugin.Devices(o.sysfsRoot, cfg, o.resourcePrefix, links)
	}
	devs, err := scan()
	if err != nil {
		return err
	}
	var names []string
	for name := range devs {
		names = append(names, name)
	}
	sort.Strings(names)
	var servers []*resourceServer
	for _, name := range names {
		rs := newResourceServer(name, o)
		rs.update(devs[name])
		if err := rs.start(); err != nil {
			return err
		}
		defer rs.stop()
		servers = append(servers, rs)
	}
	kubeletSock := filepath.Join(o.pluginDir, filepath.Base(pluginapi.KubeletSocket))
	var registeredAt time.Time
	t := time.NewTicker(rescanEvery)
	defer t.Stop()
	for {
		// Register (again) when kubelet's socket is newer than our last
		// registration: kubelet forgets plugins when it restarts.
		if st, err := os.Stat(kubeletSock); err == nil && st.ModTime().After(registeredAt) {
			ok := true
			for _, rs := range servers {
				if err := rs.register(ctx, kubeletSock); err != nil {
					log.Printf("registering %s with kubelet: %v", rs.resourceName, err)
					ok = false
				}
			}
			if ok {
				registeredAt = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if devs, err := scan(); err != nil {
			log.Printf("rescanning sysfs: %v", err)
		} else {
			for _, rs := range servers {
				rs.update(devs[rs.resourceName])
			}
		}
	}
}

// resourceServer is the device plugin of one resource.
type resourceServer struct {
	pluginapi.UnimplementedDevicePluginServer
	resourceName string
	socket       string
	devInfoDir   string
	srv          *grpc.Server

	mu      sync.Mutex
	devices map[string]devplugin.Device
	changed chan struct{} // closed and replaced on every change
}

func newResourceServer(name string, o options) *resourceServer {
	// Socket named <prefix>_<name>.sock in kubelet's plugin dir, as upstream
	// names its resource servers' sockets.
	prefix, res, _ := strings.Cut(name, "/")
	return &resourceServer{
		resourceName: name,
		socket:       filepath.Join(o.pluginDir, prefix+"_"+res+".sock"),
		devInfoDir:   o.devInfoDir,
		devices:      map[string]devplugin.Device{},
		changed:      make(chan struct{}),
	}
}

func (rs *resourceServer) update(list []devplugin.Device) {
	next := map[string]devplugin.Device{}
	for _, d := range list {
		next[d.BDF] = d
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if equalDevices(rs.devices, next) {
		return
	}
	rs.devices = next
	close(rs.changed)
	rs.changed = make(chan struct{})
	log.Printf("%s: %d devices", rs.resourceName, len(next))
}

func equalDevices(a, b map[string]devplugin.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (rs *resourceServer) start() error {
	_ = os.Remove(rs.socket)
	l, err := net.Listen("unix", rs.socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", rs.socket, err)
	}
	rs.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(rs.srv, rs)
	go func() { _ = rs.srv.Serve(l) }()
	return nil
}

func (rs *resourceServer) stop() {
	rs.srv.Stop()
	_ = os.Remove(rs.socket)
}

func (rs *resourceServer) register(ctx context.Context, kubeletSock string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(rs.socket),
		ResourceName: rs.resourceName,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	if err == nil {
		log.Printf("registered %s with kubelet (endpoint %s)", rs.resourceName, filepath.Base(rs.socket))
	}
	return err
}

func (rs *resourceServer) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (rs *resourceServer) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		rs.mu.Lock()
		resp := &pluginapi.ListAndWatchResponse{}
		for _, d := range rs.devices {
			dev := &pluginapi.Device{ID: d.BDF, Health: pluginapi.Healthy}
			if d.NUMANode >= 0 {
				dev.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.NUMANode)}}}
			}
			resp.Devices = append(resp.Devices, dev)
		}
		changed := rs.changed
		rs.mu.Unlock()
		sort.Slice(resp.Devices, func(i, j int) bool { return resp.Devices[i].ID < resp.Devices[j].ID })
		if err := stream.Send(resp); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		}
	}
}

// EnvName is the variable the plugin sets for a resource:
// PCIDEVICE_<RESOURCE NAME> upper-cased with '.' and '/' as '_'
// (PCIDEVICE_KUBEVIRT_IO_SRIOV_NET for kubevirt.io/sriov_net), holding the
// allocated PCI addresses, comma-separated.
func EnvName(resourceName string) string {
	r := strings.NewReplacer(".", "_", "/", "_", "-", "_")
	return "PCIDEVICE_" + strings.ToUpper(r.Replace(resourceName))
}

func (rs *resourceServer) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, creq := range req.ContainerRequests {
		cresp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
		info := map[string]any{}
		vfioCtl := false
		for _, id := range creq.DevicesIds {
			d, ok := rs.devices[id]
			if !ok {
				return nil, fmt.Errorf("allocate %s: unknown device %s", rs.resourceName, id)
			}
			devInfo := map[string]any{"generic": map[string]string{"deviceID": id}}
			if d.Driver == "vfio-pci" {
				if d.IOMMUGroup == "" {
					return nil, fmt.Errorf("allocate %s: vfio-pci device %s has no IOMMU group", rs.resourceName, id)
				}
				group := "/dev/vfio/" + d.IOMMUGroup
				cresp.Devices = append(cresp.Devices, &pluginapi.DeviceSpec{HostPath: group, ContainerPath: group, Permissions: "rw"})
				vfioCtl = true
				devInfo["vfio"] = map[string]string{"dev-mount": group, "mount": "/dev/vfio/vfio"}
			}
			info[id] = devInfo
			if err := rs.writeDeviceInfo(d); err != nil {
				return nil, err
			}
		}
		if vfioCtl {
			cresp.Devices = append([]*pluginapi.DeviceSpec{{HostPath: "/dev/vfio/vfio", ContainerPath: "/dev/vfio/vfio", Permissions: "rw"}}, cresp.Devices...)
		}
		env := EnvName(rs.resourceName)
		cresp.Envs[env] = strings.Join(creq.DevicesIds, ",")
		if b, err := json.Marshal(info); err == nil {
			cresp.Envs[env+"_INFO"] = string(b)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cresp)
	}
	return resp, nil
}

// writeDeviceInfo writes the device-info spec file sriov-cni and Multus
// read: <dir>/<resource with '/' as '-'>-<PCI address>-device.json
// (network-attachment-definition-client pkg/utils/cniconfig.go@v1.7.7
// getDPDeviceInfoPath), type "pci", version 1.1.0.
func (rs *resourceServer) writeDeviceInfo(d devplugin.Device) error {
	if err := os.MkdirAll(rs.devInfoDir, 0o755); err != nil {
		return err
	}
	name := fmt.Sprintf("%s-%s-device.json", strings.ReplaceAll(rs.resourceName, "/", "-"), strings.ReplaceAll(d.BDF, "/", "-"))
	b, err := json.Marshal(map[string]any{
		"type":    "pci",
		"version": "1.1.0",
		"pci":     map[string]string{"pci-address": d.BDF, "pf-pci-address": d.PFBDF},
	})
	if err != nil {
		return err
	}
	path := filepath.Join(rs.devInfoDir, name)
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
