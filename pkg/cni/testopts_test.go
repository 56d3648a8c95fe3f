package cni

// defaultTestOptions mirrors the lane's default config (kubevirt.io/sriov_net,
// sriov_capable=true, flannel, vfio-pci) with two PFs as discovery would
// name them inside the agents.
func defaultTestOptions() Options {
	return Options{
		ResourcePrefix:    "kubevirt.io",
		ResourceName:      "sriov_net",
		NodeSelectorKey:   "sriov_capable",
		NodeSelectorValue: "true",
		PFNames:           []string{"ens1f0", "ens1f1"},
	}
}
