// Package provider runs the lane's cluster on the k3d Go library: one k3s
// server and N agents in Docker or rootful Podman (both through the Docker
// API), a local registry for the dev loop, the
// node containers (stopped, loaded with images, prepared), the kubeconfig
// and a kubectl taken from the server image. Nodes' network namespaces are
// pkg/sriov's business (through pkg/containerns): nothing here enters one.
//
// Everything talks to Docker through its API (the docker client or k3d's
// runtime); nothing here runs the docker, k3d or kubectl CLIs.
//
// Where things live (TestDocFileMap keeps this list true):
//   - provider.go:      Provider and the Docker client it holds
//   - engine.go:        which container engine (Docker or rootful Podman)
//     and where its API is; what the engine is and why a lane cannot use it
//   - create.go:        Create, the cluster and registry made and waited
//     for, everything removed again on failure; RefuseExisting
//   - clusterconfig.go: the lane as k3d's SimpleConfig (k3s args, kubelet
//     args, volumes, CIDRs) and k3s's registries.yaml
//   - k3s.go:           k3s's packaged components disabled and kept, and the
//     images the nodes and the host pull
//   - hostobjects.go:   Docker objects made before k3d runs: the datastore's
//     tmpfs volume and the IPv6 network
//   - machineid.go:     a fresh machine-id per node
//   - nodehooks.go:     the k3d entrypoint hook that turns IPv6 on in a node
//   - cgroup.go:        the host's cgroup mode, which changes kubelet's flags
//   - registry.go:      the lane's local registry container
//   - names.go:         k3d's names and labels of nodes, networks, volumes
//     and the registry
//   - nodes.go:         the lane's node containers; agents stopped so that
//     nothing in them holds a VF open
//   - prepare.go:       nodes readied for the lane (shared /, /dev/vfio)
//   - exec.go:          running a command in a node container through the
//     Docker API
//   - kubeconfig.go:    the admin kubeconfig and k3s's kubectl copied out of
//     the server
//   - load.go:          Load, host images imported into every node
//   - diagnose.go:      node state shown while Create waits; why a create
//     failed (container state, log tails)
//   - delete.go:        Delete, the cluster, registry, networks and volumes
//     removed, waiting on Docker's events for it to let go
//   - events.go:        following Docker's events without missing the first
//   - undo.go:          the journal records and undoers of the cluster and
//     registry
package provider
