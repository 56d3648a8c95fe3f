// Package fleet is what a CI cluster of SR-IOV hosts needs so that each job
// pod gets whole PFs: the scheduler and the kubelet's device accounting
// count them (the SR-IOV network device plugin with a pool of whole PFs
// per host), Multus and the host-device plugin move them into the pod and
// back, and the job's own `sriov-lane up` takes exactly those in its
// netns. It renders the objects and the job from a config.Fleet, and on a
// host reports and returns the PFs a job's pod left astray.
//
// Where things live (TestDocFileMap keeps this list true):
//   - objects.go: the device plugin, its namespace and the host-device
//     NetworkAttachmentDefinition; the job pod and its Prow presubmit
//   - pfs.go:     where a host's pool PFs are (PFs) and putting back those
//     a job's pod left renamed or with VFs (Return)
package fleet
