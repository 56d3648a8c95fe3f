// Package k3drig proves the hardware-free rig: k3d v5.9.0, used as a
// library exactly as the lane's provider uses it, creates and deletes a
// cluster of stand-in k3s nodes on the shared dockerd.
//
// Its only files are tests (k3drig_test.go, node_test.go), so its file map
// is empty; TestDocFileMap fails once a non-test file arrives unlisted.
package k3drig
