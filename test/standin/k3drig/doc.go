// Package k3drig proves the hardware-free rig: k3d v5.9.0, used as a
// library exactly as the lane's provider uses it, creates and deletes a
// cluster of stand-in k3s nodes on the shared dockerd.
package k3drig
