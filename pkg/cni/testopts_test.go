package cni

import "github.com/sriov-lane/sriov-lane/pkg/config"

// defaultTestOptions are the options of the lane's default config
// (kubevirt.io/sriov_net, sriov_capable=true, flannel, vfio-pci, ipv4) with
// two PFs as discovery would name them inside the agents.
func defaultTestOptions() Options {
	l := config.Default()
	key, val := l.NodeLabelKV()
	return Options{
		CNI:               l.CNI,
		IPFamily:          l.IPFamily,
		VFDriver:          l.VFDriver,
		ResourcePrefix:    l.ResourcePrefix,
		ResourceName:      l.ResourceName,
		NodeSelectorKey:   key,
		NodeSelectorValue: val,
		PFNames:           []string{"ens1f0", "ens1f1"},
	}
}
