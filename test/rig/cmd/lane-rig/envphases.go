package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/docker/docker/client"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// env is one run of `lane-rig env`: what its phases built so far, by name.
type env struct {
	o      envOptions
	l      *envLog
	assets string
	b      *builder
	images *imager
	docker *client.Client
	bin    map[string]string // binary name -> its path in the cache
}

type phase struct {
	name string
	run  func(context.Context) error
}

// Build settings of the tools, as each project's own build sets them
// (cited where each set is defined below).
const (
	k8sLDFlags  = "-s -w -X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean"
	ctrdLDFlags = "-s -w -X github.com/containerd/containerd/v2/version.Version=v2.4.2"
	multusPkg   = "gopkg.in/k8snetworkplumbingwg/multus-cni.v4"
	injectorPkg = "github.com/k8snetworkplumbingwg/network-resources-injector"
	// standinLDFlags: stand-ins are also built with -buildvcs=false, as a
	// stand-in with a go.mod of its own would carry this checkout's commit
	// and dirty bit, and every commit would rebuild its image.
	standinLDFlags = "-ldflags=-s -w"
)

var cgoOff = []string{"CGO_ENABLED=0"}

// The tool sets. kube-apiserver and etcd and the node's kube components:
// one module (k8s.io/kubernetes v1.36.3), CGO_ENABLED=0 as they run in
// FROM-scratch images.
var k8sTools = toolSet{name: "k8s", dir: "hack/tools", env: cgoOff,
	flags: []string{"-ldflags=" + k8sLDFlags},
	pkgs: []string{"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubelet",
		"k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes/cmd/kube-proxy",
		"go.etcd.io/etcd/server/v3=etcd"}}

// The node's container runtime (hack/tools/node): containerd v2 + ctr and
// the reference CNI plugins (no btrfs/devmapper/zfs), and the runc shim
// (no_grpc).
var (
	ctrdTools = toolSet{name: "ctrd", dir: "hack/tools/node", env: cgoOff,
		flags: []string{"-tags=no_btrfs,no_devmapper,no_zfs", "-ldflags=" + ctrdLDFlags},
		pkgs: []string{"github.com/containerd/containerd/v2/cmd/containerd", "github.com/containerd/containerd/v2/cmd/ctr",
			"github.com/containernetworking/plugins/plugins/main/bridge", "github.com/containernetworking/plugins/plugins/main/loopback",
			"github.com/containernetworking/plugins/plugins/ipam/host-local", "github.com/containernetworking/plugins/plugins/meta/portmap",
			"github.com/containernetworking/plugins/plugins/meta/bandwidth", "github.com/containernetworking/plugins/plugins/meta/firewall"}}
	// The host-device CNI plugin, which a fleet's cluster has on its SR-IOV
	// hosts and k3s does not ship: the fleet test puts it in its lane's
	// agents, behind test/rig/cmd/sysfs-shim.
	hostDeviceTools = toolSet{name: "host-device", dir: "hack/tools/node", env: cgoOff,
		flags: []string{"-ldflags=-s -w"},
		pkgs:  []string{"github.com/containernetworking/plugins/plugins/main/host-device"}}
	shimTools = toolSet{name: "shim", dir: "hack/tools/node", env: cgoOff,
		flags: []string{"-tags=no_grpc,no_btrfs,no_devmapper,no_zfs", "-ldflags=" + ctrdLDFlags},
		pkgs:  []string{"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"}}
)

// runcTools: runc needs cgo and libseccomp (kubelet asks for the
// RuntimeDefault seccomp profile): a static-pie against Debian's
// libseccomp.a, unpacked from its package (sc), not installed. The
// package's file name keys it.
func runcTools(sc, scLib, deb string) toolSet {
	return toolSet{name: "runc " + deb, dir: "hack/tools/node",
		env: []string{"CGO_ENABLED=1", "CGO_CFLAGS=-I" + sc + "/usr/include", "CGO_LDFLAGS=-L" + scLib,
			"PKG_CONFIG_PATH=" + scLib + "/pkgconfig", "PKG_CONFIG_SYSROOT_DIR=" + sc},
		flags: []string{"-buildmode=pie", "-tags=seccomp,netgo,osusergo", "-ldflags=-s -w -X main.version=1.5.3 -linkmode external -extldflags -static-pie"},
		pkgs:  []string{"github.com/opencontainers/runc"}}
}

var (
	// Flannel v0.28.9: flanneld as upstream's Makefile builds it on amd64
	// (cgo for the udp backend, static, version ldflag) and install-conf
	// (CGO_ENABLED=0), as images/Dockerfile@v0.28.9 builds them.
	flanneldTools = toolSet{name: "flanneld", dir: "hack/tools/flannel", env: []string{"CGO_ENABLED=1"},
		flags: []string{"-tags=netgo,osusergo", "-ldflags=-s -w -X github.com/flannel-io/flannel/pkg/version.Version=v0.28.9 -extldflags -static"},
		pkgs:  []string{"github.com/flannel-io/flannel=flanneld"}}
	installConfTools = toolSet{name: "install-conf", dir: "hack/tools/flannel", env: cgoOff,
		flags: []string{"-ldflags=-s -w"},
		pkgs:  []string{"github.com/flannel-io/flannel/cmd/install_conf=install-conf"}}
	// Multus v4.3.0 as hack/build-go.sh@v4.3.0 builds it (CGO_ENABLED=0,
	// its version ldflags): the programs a lane's thick DaemonSet runs
	// (install_multus, multus-daemon) and the two install_multus copies to
	// the node (multus-shim and passthru: cmd/install_multus/main.go@v4.3.0).
	// Upstream's image has four more (thin plugin, thin entrypoint,
	// kubeconfig generator, cert-approver) no lane runs; at ~35 MB each they
	// doubled what every node pulls and unpacks on every rig up.
	multusTools = toolSet{name: "multus", dir: "hack/tools/multus", env: cgoOff,
		flags: []string{"-ldflags=-s -w -X " + multusPkg + "/pkg/multus.version=v4.3.0 -X " + multusPkg + "/pkg/multus.gitTreeState=clean -X " + multusPkg + "/pkg/multus.releaseStatus=,released"},
		pkgs:  []string{multusPkg + "/cmd/multus-daemon", multusPkg + "/cmd/multus-shim", multusPkg + "/cmd/install_multus", multusPkg + "/cmd/passthru-cni=passthru"}}
	// network-resources-injector v1.9.0: webhook and installer as
	// scripts/build.sh@v1.9.0 builds them (CGO_ENABLED=0, -tags no_openssl,
	// -ldflags "-s -w").
	injectorTools = toolSet{name: "injector", dir: "hack/tools/injector", env: cgoOff,
		flags: []string{"-tags=no_openssl", "-ldflags=-s -w"},
		pkgs:  []string{injectorPkg + "/cmd/webhook", injectorPkg + "/cmd/installer"}}
	// CoreDNS v1.14.3, the version k3s v1.35.5+k3s1 deploys (hack/tools/coredns:
	// k3s's Corefile's plugins only), as its Makefile@v1.14.3 builds it
	// (CGO_ENABLED=0, -tags grpcnotrace, -s -w, coremain.GitCommit).
	// -buildvcs=false: its main package is in this repository, and a
	// stamped commit would make the binary, and so the image, differ by
	// checkout.
	corednsTools = toolSet{name: "coredns", dir: "hack/tools/coredns", env: cgoOff,
		flags: []string{"-buildvcs=false", "-tags=grpcnotrace", "-ldflags=-s -w -X github.com/coredns/coredns/coremain.GitCommit=v1.14.3"},
		pkgs:  []string{"."}}
	registryTools = toolSet{name: "registry", dir: "hack/tools/registry", env: cgoOff,
		flags: []string{"-ldflags=-s -w"},
		pkgs:  []string{"github.com/distribution/distribution/v3/cmd/registry"}}
)

// The stand-ins, built as the tools are. component-base's version in the
// k3s stand-in is kubectl's (k8s.io/kubectl v0.37.2 is linked in), as k3s
// sets it to its own (k3s-io/k3s scripts/build@v1.35.5+k3s1, read at
// 6a4781ad: -X k8s.io/component-base/version.gitVersion=${VERSION}).
var (
	standinK3sTools = toolSet{name: "standin-k3s", dir: ".", env: cgoOff,
		flags: []string{"-buildvcs=false", "-ldflags=-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"},
		pkgs:  []string{"./test/standin/k3s"}}
	standinPauseTools = standin(".", "./test/standin/pause")
	standinCNIMulti   = standin(".", "./test/standin/cnimulti=cni")
	standinFlannelCNI = standin("test/standin/flannelcni", ".=flannel")
	standinSRIOVDP    = standin("test/standin/sriovdp", ".")
	standinSRIOVCNI   = standin("test/standin/sriovcni", ".=sriov")
	standinDRASRIOV   = standin("test/standin/drasriov", ".=dra-driver-sriov")
	standinLocalPath  = standin("test/standin/localpath", ".=local-path-provisioner")
	// sriov-lane itself, for the fleet test's job image.
	sriovLaneTools = toolSet{name: "sriov-lane", dir: ".", env: cgoOff, flags: []string{"-buildvcs=false", "-ldflags=-s -w"},
		pkgs: []string{"./cmd/sriov-lane"}}
)

func standin(dir, pkg string) toolSet {
	return toolSet{name: "standin " + pkg, dir: dir, env: cgoOff, flags: []string{"-buildvcs=false", standinLDFlags}, pkgs: []string{pkg}}
}

// tools builds t and records its binaries by name.
func (e *env) tools(ctx context.Context, t toolSet) error {
	dir, err := e.b.build(ctx, t)
	if err != nil {
		return err
	}
	mod, err := modulePath(filepath.Join(e.o.root, t.dir))
	if err != nil {
		return err
	}
	if e.bin == nil {
		e.bin = map[string]string{}
	}
	for _, n := range t.binaries(mod) {
		e.bin[n] = filepath.Join(dir, n)
	}
	return nil
}

// standinImage is the phase of a stand-in's image: the stand-in built
// (tools), then the image spec gives once its binaries are known (e.bin).
func (e *env) standinImage(t toolSet, spec func() imageSpec) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := e.tools(ctx, t); err != nil {
			return err
		}
		return e.images.ensure(ctx, spec())
	}
}

// assetLinks links bin/test-assets/NAME to each named binary.
func (e *env) assetLinks(names ...string) error {
	for _, n := range names {
		if err := linkInto(e.assets, n, e.bin[n]); err != nil {
			return fmt.Errorf("linking %s into %s: %w", n, e.assets, err)
		}
	}
	return nil
}

func (e *env) phases() []phase {
	const standinLib = "/usr/lib/sriov-lane-standin"
	return []phase{
		{"kube-apiserver+etcd", func(ctx context.Context) error {
			if err := e.tools(ctx, k8sTools); err != nil {
				return err
			}
			return e.assetLinks("kube-apiserver", "etcd", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy")
		}},
		{"node-runtime", func(ctx context.Context) error {
			sc, scLib, deb, err := libseccomp(ctx, e.o.cache)
			if err != nil {
				return err
			}
			for _, t := range []toolSet{ctrdTools, shimTools, hostDeviceTools, runcTools(sc, scLib, deb)} {
				if err := e.tools(ctx, t); err != nil {
					return err
				}
			}
			return e.assetLinks("containerd", "ctr", "bridge", "loopback", "host-local", "portmap", "bandwidth", "firewall", "containerd-shim-runc-v2", "runc", "host-device")
		}},
		{"flannel", func(ctx context.Context) error {
			if err := e.tools(ctx, flanneldTools); err != nil {
				return err
			}
			return e.tools(ctx, installConfTools)
		}},
		{"multus", func(ctx context.Context) error { return e.tools(ctx, multusTools) }},
		{"injector", func(ctx context.Context) error { return e.tools(ctx, injectorTools) }},
		{"coredns", func(ctx context.Context) error { return e.tools(ctx, corednsTools) }},
		{"registry", func(ctx context.Context) error {
			if err := e.tools(ctx, registryTools); err != nil {
				return fmt.Errorf("%w (rig lanes get their images from the registry)", err)
			}
			return e.assetLinks("registry")
		}},
		{"standin-k3s-binary", func(ctx context.Context) error {
			if err := os.WriteFile(filepath.Join(e.o.root, "bin", ".gitignore"), []byte("*\n"), 0o644); err != nil {
				return err
			}
			return e.tools(ctx, standinK3sTools)
		}},
		// flannel's CNI plugin stand-in: in the node's /bin as rancher/k3s
		// ships flannel there, and as /flannel in flannel-cni-plugin's image.
		{"flannel-cni", func(ctx context.Context) error { return e.tools(ctx, standinFlannelCNI) }},
		// The sandbox image, served by the rig registry under the name k3s
		// pulls; the node image carries no copy, as rancher/k3s carries
		// none. USER as upstream's image (kubernetes
		// build/pause/Dockerfile@v1.36.3).
		{"image-pause", e.standinImage(standinPauseTools, func() imageSpec {
			return imageSpec{tag: testutil.StandinPauseImage, noBusybox: true,
				body:  "USER 65535:65535\nENTRYPOINT [\"/pause\"]",
				files: []fileSpec{{e.bin["pause"], "/pause"}}}
		})},
		// The node image: the stand-in k3s supervisor as /bin/k3s and the
		// real components it starts, in rancher/k3s's places (k3s-io/k3s
		// package/Dockerfile@v1.35.5+k3s1: k3s's data archive unpacked at /,
		// binaries and CNI plugins in /bin, iptables in /bin/aux, these
		// VOLUMEs).
		// /var/lib/rancher/k3s holds containerd's root (agent/containerd),
		// so it is a Docker volume, as overlayfs snapshots cannot live on
		// the container's own overlay. k3s links kubectl to its multi-call
		// binary, and the stand-in is a whole kubectl too. ctr is the real
		// one, pointed at k3s's containerd socket and namespace as k3s's
		// ctr defaults to. iptables (kube-proxy, CNI plugins, k3d's DNS
		// fix) is Debian's iptables-nft with the libraries it loads. The
		// CNI plugins as rancher/k3s lays them out: /bin/cni, one
		// multi-call binary, and a relative link to it per plugin in /bin
		// (k3s-io/k3s scripts/package-cli@v1.35.5+k3s1, read at 6a4781ad:
		// ln -s cni bin/<plugin>); the stand-in
		// multi-call (test/standin/cnimulti) runs the real plugin of that
		// name from /usr/lib/sriov-lane-standin/cni.
		{"image-k3s", func(ctx context.Context) error {
			if err := e.tools(ctx, standinCNIMulti); err != nil {
				return err
			}
			// /etc/os-release as the real image's (k3s-io/k3s
			// package/Dockerfile, stored at 09ffe1ba47f6: PRETTY_NAME="K3s
			// <tag>"): dra-driver-sriov's pod mounts it as a hostPath of type
			// File, which kubelet refuses to start without.
			files := []fileSpec{{e.bin["k3s"], "/bin/k3s"}, {e.bin["cni"], "/bin/cni"}, {e.bin["flannel"], standinLib + "/cni/flannel"},
				{filepath.Join(e.o.root, "test/standin/k3s/os-release"), "/etc/os-release"}}
			for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "runc"} {
				files = append(files, fileSpec{e.bin[b], "/bin/" + b})
			}
			for _, b := range []string{"bridge", "loopback", "host-local", "portmap", "bandwidth", "firewall"} {
				files = append(files, fileSpec{e.bin[b], standinLib + "/cni/" + b})
			}
			var cniLinks string
			for _, b := range []string{"bandwidth", "bridge", "firewall", "flannel", "host-local", "loopback", "portmap"} {
				cniLinks += " /bin/" + b + "=cni"
			}
			xt, xtLinks, err := iptablesFiles("/bin/aux")
			if err != nil {
				return err
			}
			return e.images.ensure(ctx, imageSpec{tag: testutil.StandinK3sImage, k3sLinks: "kubectl",
				body: "ENV PATH=/bin/aux:/bin:/sbin:/usr/bin:/usr/sbin CONTAINERD_ADDRESS=/run/k3s/containerd/containerd.sock CONTAINERD_NAMESPACE=k8s.io\n" +
					"VOLUME /var/lib/kubelet /var/lib/rancher/k3s /var/lib/cni /var/log\nENTRYPOINT [\"/bin/k3s\"]\nCMD [\"agent\"]",
				links: xtLinks + cniLinks, files: append(files, xt...)})
		}},
		// The SR-IOV device plugin stand-in (its upstream module is
		// refused): upstream's args go to its entrypoint as with the real image.
		{"image-sriovdp", e.standinImage(standinSRIOVDP, func() imageSpec {
			return imageSpec{tag: testutil.StandinDevicePluginImage, body: `ENTRYPOINT ["/usr/bin/sriovdp"]`,
				files: []fileSpec{{e.bin["sriovdp"], "/usr/bin/sriovdp"}}}
		})},
		// The sriov-cni stand-in (its upstream module is refused), laid out
		// as the upstream image (k8snetworkplumbingwg/sriov-cni
		// Dockerfile@v2.10.0): the plugin at /usr/bin/sriov and
		// /entrypoint.sh as the entrypoint, which the product's DaemonSet
		// runs without arguments to copy it into /host/opt/cni/bin and
		// sleep; busybox gives it sh, awk, cp and sleep.
		{"image-sriov-cni", e.standinImage(standinSRIOVCNI, func() imageSpec {
			return imageSpec{tag: testutil.StandinSRIOVCNIImage, body: `ENTRYPOINT ["/entrypoint.sh"]`,
				files: []fileSpec{{e.bin["sriov"], "/usr/bin/sriov"}, {filepath.Join(e.o.root, "test/standin/sriovcni/entrypoint.sh"), "/entrypoint.sh"}}}
		})},
		// The dra-driver-sriov stand-in (its upstream module is refused),
		// at the path the product's DaemonSet runs (its command,
		// /usr/bin/dra-driver-sriov, as the chart's).
		{"image-dra-driver-sriov", e.standinImage(standinDRASRIOV, func() imageSpec {
			return imageSpec{tag: testutil.StandinDRADriverImage, body: `ENTRYPOINT ["/usr/bin/dra-driver-sriov"]`,
				files: []fileSpec{{e.bin["dra-driver-sriov"], "/usr/bin/dra-driver-sriov"}}}
		})},
		// Flannel under its upstream name, laid out as
		// images/Dockerfile@v0.28.9 (/opt/bin/flanneld, /opt/bin/install-conf,
		// iptables) on busybox instead of alpine (the product's init
		// container uses cp).
		{"image-flannel", func(ctx context.Context) error {
			xt, xtLinks, err := iptablesFiles("/usr/sbin")
			if err != nil {
				return err
			}
			return e.images.ensure(ctx, imageSpec{tag: cni.FlannelImage, body: `ENTRYPOINT ["/opt/bin/flanneld"]`,
				links: xtLinks + " /var/run=/run",
				files: append([]fileSpec{{e.bin["flanneld"], "/opt/bin/flanneld"}, {e.bin["install-conf"], "/opt/bin/install-conf"}}, xt...)})
		}},
		{"image-flannel-cni-plugin", func(ctx context.Context) error {
			return e.images.ensure(ctx, imageSpec{tag: testutil.StandinFlannelCNIPluginImage, body: `CMD ["/bin/sh"]`,
				files: []fileSpec{{e.bin["flannel"], "/flannel"}}})
		}},
		// Multus thick under its upstream name, laid out as
		// images/Dockerfile.thick@v4.3.0: programs in
		// /usr/src/multus-cni/bin, the daemon as entrypoint; busybox instead
		// of debian:stable-slim. /var/run is a link to /run as in
		// debian:stable-slim: the product mounts the node's /var/run/netns
		// at /run/netns, and the daemon opens the netns paths containerd
		// hands it (/var/run/netns/cni-...) through that link.
		{"image-multus", func(ctx context.Context) error {
			var files []fileSpec
			for _, b := range []string{"multus-daemon", "multus-shim", "install_multus", "passthru"} {
				files = append(files, fileSpec{e.bin[b], "/usr/src/multus-cni/bin/" + b})
			}
			return e.images.ensure(ctx, imageSpec{tag: cni.MultusImage, body: `ENTRYPOINT ["/usr/src/multus-cni/bin/multus-daemon"]`,
				links: "/var/run=/run", files: files})
		}},
		// network-resources-injector under its upstream name, laid out as
		// Dockerfile@v1.9.0: webhook and installer in /usr/bin, found
		// through PATH (the product's container runs `command: [webhook]`),
		// USER 1001, CMD ["webhook"]; busybox instead of alpine, with
		// alpine's PATH.
		{"image-injector", func(ctx context.Context) error {
			return e.images.ensure(ctx, imageSpec{tag: cni.InjectorImage,
				body:  "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nUSER 1001\nCMD [\"webhook\"]",
				files: []fileSpec{{e.bin["webhook"], "/usr/bin/webhook"}, {e.bin["installer"], "/usr/bin/installer"}}})
		}},
		// CoreDNS under the name k3s's coredns.yaml gives it, laid out as
		// Dockerfile@v1.14.3 (/coredns, the entrypoint, from /, ports 53)
		// but run as root where upstream's runs as nonroot with
		// cap_net_bind_service set on /coredns: the build context carries
		// no extended attributes, where a file capability lives, and a
		// non-root process loses at exec the NET_BIND_SERVICE the pod adds,
		// so it could not bind :53. k3s's Deployment sets no user, so root
		// is what it gets.
		{"image-coredns", func(ctx context.Context) error {
			return e.images.ensure(ctx, imageSpec{tag: provider.K3sCoreDNSImage, noBusybox: true,
				body:  "WORKDIR /\nEXPOSE 53 53/udp\nENTRYPOINT [\"/coredns\"]",
				files: []fileSpec{{e.bin["coredns"], "/coredns"}}})
		}},
		// local-path-provisioner's stand-in (its v0.0.36 module is refused)
		// under the name k3s's local-storage.yaml gives it, laid out as
		// package/Dockerfile@v0.0.36: /usr/bin/local-path-provisioner,
		// found through PATH as k3s's Deployment runs it; busybox instead
		// of alpine.
		{"image-local-path", e.standinImage(standinLocalPath, func() imageSpec {
			return imageSpec{tag: provider.K3sLocalPathImage, body: `CMD ["local-path-provisioner"]`,
				files: []fileSpec{{e.bin["local-path-provisioner"], "/usr/bin/local-path-provisioner"}}}
		})},
		{"image-tools", func(ctx context.Context) error {
			return e.images.ensure(ctx, imageSpec{tag: testutil.StandinToolsImage, body: "ENTRYPOINT [\"/bin/k3s\"]\nCMD [\"noop\"]",
				files: []fileSpec{{e.bin["k3s"], "/bin/k3s"}}})
		}},
		{"image-busybox", func(ctx context.Context) error {
			return e.images.ensure(ctx, imageSpec{tag: testutil.StandinBusyboxImage, body: `CMD ["sh"]`})
		}},
		// A fleet's job image as the fleet test runs it: a CI image that
		// holds sriov-lane (pkg/fleet JobPod).
		{"image-fleet-job", e.standinImage(sriovLaneTools, func() imageSpec {
			return imageSpec{tag: testutil.StandinFleetJobImage, body: `CMD ["sh"]`,
				files: []fileSpec{{e.bin["sriov-lane"], "/usr/bin/sriov-lane"}}}
		})},
		{"image-registry", func(ctx context.Context) error {
			cfg := filepath.Join(e.o.cache, "registry-config.yml")
			if err := atomicfile.Write(cfg, []byte(registryConfig), 0o644); err != nil {
				return err
			}
			return e.images.ensure(ctx, imageSpec{tag: testutil.StandinRegistryImage,
				body:  "EXPOSE 5000\nENTRYPOINT [\"/bin/registry\"]\nCMD [\"serve\", \"/etc/docker/registry/config.yml\"]",
				files: []fileSpec{{e.bin["registry"], "/bin/registry"}, {cfg, "/etc/docker/registry/config.yml"}}})
		}},
		{"rig-registry", e.rigRegistry},
		// The host images of rig lanes on Podman, in Podman's store
		// (envpodman.go).
		{"podman-images", e.podmanImages},
		// The kernel tier's guest kernels (test/kernel): Debian's, with the
		// modules it loads, from apt (envkernel.go).
		{"kernels", e.kernels},
	}
}

// registryConfig is the stand-in registry image's config: storage under
// /var/lib/registry (the rig registry mounts its cache there), deletes
// allowed, :5000 unless REGISTRY_HTTP_ADDR says otherwise.
const registryConfig = `version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: /var/lib/registry
  delete:
    enabled: true
http:
  addr: :5000
`

// libseccomp unpacks Debian's libseccomp-dev into <cache>/libseccomp-dev
// once (runc links it statically) and returns the unpacked root, the
// directory of libseccomp.a and the package's file name.
func libseccomp(ctx context.Context, cache string) (root, libDir, deb string, err error) {
	dir := filepath.Join(cache, "libseccomp-dev")
	root = filepath.Join(dir, "root")
	if _, err := os.Stat(filepath.Join(root, "usr/include/seccomp.h")); err != nil {
		if err := os.RemoveAll(dir); err != nil {
			return "", "", "", err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", "", "", err
		}
		download := func() error {
			c := exec.CommandContext(ctx, "apt-get", "download", "libseccomp-dev")
			c.Dir = dir
			return c.Run()
		}
		if download() != nil {
			if out, err := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); err != nil {
				return "", "", "", fmt.Errorf("apt-get update: %w: %s", err, out)
			}
			if err := download(); err != nil {
				return "", "", "", fmt.Errorf("apt-get download libseccomp-dev: %w", err)
			}
		}
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "libseccomp-dev_*.deb"))
	if len(debs) == 0 {
		return "", "", "", fmt.Errorf("no libseccomp-dev_*.deb in %s", dir)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/include/seccomp.h")); err != nil {
		if out, err := exec.CommandContext(ctx, "dpkg", "-x", debs[0], root).CombinedOutput(); err != nil {
			return "", "", "", fmt.Errorf("dpkg -x %s: %w: %s", debs[0], err, out)
		}
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && libDir == "" && d.Name() == "libseccomp.a" {
			libDir = filepath.Dir(p)
		}
		return err
	})
	if err == nil && libDir == "" {
		err = fmt.Errorf("no libseccomp.a under %s", root)
	}
	return root, libDir, filepath.Base(debs[0]), err
}

// xtables is Debian's iptables-nft (package iptables), which the node and
// flannel images carry with the libraries it loads.
const (
	xtables    = "/usr/sbin/xtables-nft-multi"
	xtablesExt = "/usr/lib/x86_64-linux-gnu/xtables"
)

// iptablesFiles are xtables, its libraries (as ldd finds them) and
// extensions, and the links from dir that run it as each iptables command.
func iptablesFiles(dir string) ([]fileSpec, string, error) {
	if _, err := os.Stat(xtables); err != nil {
		return nil, "", fmt.Errorf("%s missing (Debian package iptables): %w", xtables, err)
	}
	files := []fileSpec{{xtables, dir + "/xtables-nft-multi"}, {"/etc/protocols", "/etc/protocols"}, {"/etc/services", "/etc/services"}}
	exts, _ := filepath.Glob(xtablesExt + "/*.so")
	// The extensions are dlopen()ed, so ldd of xtables alone misses what
	// they link: libxt_statistic.so needs libm, and without it every
	// iptables-restore of kube-proxy's fails once a Service has two
	// endpoints (the random split is `-m statistic`), leaving the
	// Services after it unprogrammed on that node.
	seen := map[string]bool{}
	for _, bin := range append([]string{xtables}, exts...) {
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			return nil, "", fmt.Errorf("ldd %s: %w", bin, err)
		}
		for _, lib := range lddPaths(string(out)) {
			if !seen[lib] && !strings.HasPrefix(lib, xtablesExt+"/") {
				seen[lib] = true
				files = append(files, fileSpec{lib, lib})
			}
		}
	}
	for _, x := range exts {
		files = append(files, fileSpec{x, x})
	}
	var links string
	for _, l := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore",
		"iptables-nft", "iptables-nft-save", "iptables-nft-restore", "ip6tables-nft", "ip6tables-nft-save", "ip6tables-nft-restore"} {
		links += " " + dir + "/" + l + "=xtables-nft-multi"
	}
	return files, links, nil
}

// lddPaths are the files ldd's output names: "lib => PATH (addr)" and the
// loader's "PATH (addr)"; linux-vdso has no file.
func lddPaths(out string) []string {
	var paths []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>":
			paths = append(paths, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			paths = append(paths, f[0])
		}
	}
	return paths
}
