// Command sriovdp stands in for the SR-IOV network device plugin
// (ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3.11.0), whose
// Go module the proxy refuses. It does what the plugin at v3.11.0 does for
// netDevice pools of VFs, read in k8snetworkplumbingwg/sriov-network-device-plugin
// at that tag (cited by path in the code):
//
//   - reads /etc/pcidp/config.json, picks each pool's devices once at start
//     from sysfs with every netDevice selector, and leaves out pools with
//     none;
//   - serves one kubelet device plugin endpoint per pool (k8s.io/kubelet
//     deviceplugin/v1beta1), registered through kubelet's plugin watcher
//     when /var/lib/kubelet/plugins_registry exists (the product's pod
//     mounts it), else by a Register call on kubelet.sock;
//   - answers Allocate with PCIDEVICE_<prefix>_<name> and its _INFO, the
//     VFIO device specs of vfio-pci devices, and device info files in
//     /var/run/k8s.cni.cncf.io/devinfo/dp for Multus and sriov-cni.
//
// It ends as upstream's process does on the same input, with the same
// status (see exit). conformance_test.go holds the inputs, row by row,
// with what v3.11.0 does with each and where it is read.
//
// Two things are the stand-in's own. sysfs is the rig's fake one, found by
// test/standin/rigsysfs (the product mounts no /sys into the pod). And the
// VFIO device specs name character devices the stand-in makes (see
// resourceServer.Allocate), because the rig has no real ones. It refuses
// what it does not implement: accelerator and auxNetDevice pools,
// needVhostNet, functions bound to uio or igb_uio, and --use-cdi. It logs
// to stderr only.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go:    the entrypoint's arguments, the options and run: config
//     read, pools picked, one server per pool started
//   - config.go:  config.json decoded and validated as upstream does
//   - devices.go: the netDevice functions found in sysfs and the selectors
//     that put them in pools
//   - server.go:  one pool's device plugin: registration, ListAndWatch,
//     Allocate's env, VFIO device specs and device info files
//   - exit.go:    how the process ends, with upstream's status for the
//     same input
package main
