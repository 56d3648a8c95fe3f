// Package provider runs the lane's cluster on the k3d Go library: one k3s
// server and N agents in Docker, a local registry for the dev loop, the
// node containers (stopped, loaded with images, prepared), the kubeconfig
// and a kubectl taken from the server image. Nodes' network namespaces are
// pkg/sriov's business (through pkg/containerns): nothing here enters one.
//
// Everything talks to Docker through its API (the docker client or k3d's
// runtime); nothing here runs the docker, k3d or kubectl CLIs.
package provider
