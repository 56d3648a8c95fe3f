// Package provider runs the lane's cluster on the k3d Go library: one k3s
// server and N agents in Docker, a local registry for the dev loop, handles
// on the node containers (their current network namespace), the kubeconfig
// and a kubectl taken from the server image.
//
// Everything talks to Docker through its API (the docker client or k3d's
// runtime); nothing here runs the docker, k3d or kubectl CLIs.
package provider
