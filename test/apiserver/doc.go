// Package apiserver runs a real etcd and kube-apiserver from prebuilt
// binaries (built by `make test-env`), for tests and for the stand-in k3s
// node image. Nothing here is product code.
//
// It writes only under Options.Dir (a temporary directory unless given) and
// Options.EtcdDir, and listens only on the ports Options names, so control
// planes started side by side, each on its own test slot, do not collide.
//
// Where things live (TestDocFileMap keeps this list true):
//   - server.go:  Options, Start (etcd, then kube-apiserver, then /readyz),
//     Stop, Wait, Logs; the admin kubeconfig; FirstIP
//   - certs.go:   the CA, serving certificate and service-account key; the
//     CA and key kept across restarts in one Dir, the serving certificate
//     always renewed
//   - testing.go: TestOptions and StartForTest, a control plane from the
//     test assets on a test slot's ports
package apiserver
