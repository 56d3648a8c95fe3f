// Package config defines the lane configuration file (apiVersion
// sriov-lane.io/v1alpha1, kind Lane), its defaults, validation and the
// precedence of flags over environment over file over defaults.
//
// Where things live (TestDocFileMap keeps this list true):
//   - types.go:    Lane and its sections (the YAML keys) and the values a
//     field may take (VF drivers, IP families, CNIs, kubelet policies)
//   - defaults.go: the pinned defaults (k3s image, wait timeout),
//     SetDefaults, and what a lane derives from its config (dir,
//     kubeconfig, PFs needed)
//   - fields.go:   the file's leaves by YAML path (Fields) and a lane's
//     values by them (Values): what settings and the generated
//     configuration reference name
//   - network.go:  the pod and service CIDRs per CNI and IP family
//   - load.go:     the flag/env Settings table, AddFlags, Load's
//     precedence, and strict one-document decoding
//   - strict.go:   unknown keys found and named by their full path
//   - validate.go: Validate, InvalidError (exit 2) and --volume parsing
//   - duration.go: Duration as "10m0s" in YAML and JSON
//   - fleet.go:    the fleet file (kind Fleet) of `sriov-lane fleet`: its
//     types, defaults, validation and strict loading
package config
