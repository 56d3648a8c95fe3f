// Command local-path-provisioner stands in for rancher/local-path-provisioner
// v0.0.36, the version k3s v1.35.5+k3s1 deploys (its release's "Embedded
// Component Versions"), whose module the proxy refuses. It runs the same
// controller library at the version v0.0.36 pins
// (sigs.k8s.io/sig-storage-lib-external-provisioner/v11 v11.0.1, go.mod@v0.0.36),
// so which claims are provisioned, how PVs are named, bound and released,
// retries and events are the library's; the provisioner it drives is
// written here from main.go, provisioner.go and util.go@v0.0.36: the same
// command line, config file, helper pods and PersistentVolumes. Nothing in
// it knows the rig.
//
// It touches nodes only through helper pods in its namespace, as upstream
// does: they make and remove the volumes' directories.
//
// It fails where upstream fails, and as upstream does: an empty path or a
// null entry in nodePathMap, a claim or PV without volumeMode, and a helper
// pod template refused when read again from $CONFIG_MOUNT_PATH panic there
// and here. conformance_test.go holds the inputs, row by row, with what
// v0.0.36 does with each and where it is read.
//
// Where things live (TestDocFileMap keeps this list true):
//   - main.go:        the command line (start's flags, their environment
//     and defaults), the client config, the config file and helper pod
//     template from flags or the ConfigMap, the library's controller run
//   - provisioner.go: the config file, checked and read again every 30 s;
//     the helper pod template and what it may not hold; Provision and
//     Delete, each through a helper pod on the volume's node
package main
