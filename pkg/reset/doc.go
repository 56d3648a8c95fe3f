// Package reset returns a running lane's cluster to the baseline up
// recorded, through the Kubernetes clients alone: it knows nothing of
// Docker, PFs or the journal. pkg/lane drives it (the lane's lock, the
// progress steps, the PF repair and the wait as up does).
//
// Where things live (TestDocFileMap keeps this list true):
//   - baseline.go: the baseline up records (Record), saved in the lane dir
//     (Save, Load)
//   - cluster.go:  what the cluster holds now, every cluster-scoped type
//     read through discovery and metadata lists
//   - plan.go:     what goes and what stays (planReset): the baseline's
//     objects, the system's own, the order of the deletes
//   - delete.go:   a pass of deletes (Delete) and its wait (Pass.Wait)
//   - wait.go:     the waits until what was deleted is gone, and what is
//     left when they time out
//   - emptyns.go:  the namespaces reset empties and finalizes itself, as
//     kube-controller-manager would, without its 5 s wait
//   - claims.go:   the job's ResourceClaims and templates in the
//     namespaces that stay, which would hold devices from the next job
package reset
