#!/usr/bin/env bash
# Prepares the hardware-free test environment on a Debian machine (as root):
# Docker with a capability-trimming runc shim, real kube-apiserver/etcd
# binaries built from Go modules, and the stand-in k3s/k3d-tools/registry
# images. Idempotent: a second run only checks and takes seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="/usr/local/go/bin:${PATH}:/usr/sbin:/sbin"
export DEBIAN_FRONTEND=noninteractive

WRAPPER=/usr/local/sbin/sriov-lane-runc
DAEMON_JSON=/etc/docker/daemon.json
DOCKERD_LOG=/var/log/sriov-lane-dockerd.log
# Built tools, the rig registry's storage and the lock; SRIOV_LANE_CACHE_ROOT
# moves them (a CI cache volume, or an empty dir to time a cold build).
CACHE_ROOT="${SRIOV_LANE_CACHE_ROOT:-/var/cache/sriov-lane}"
ASSETS="${ROOT}/bin/test-assets"

# Image names mirror the constants in test/testutil/require.go.
go_const() { # FILE NAME
	sed -n "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*\"\\([^\"]*\\)\".*/\\1/p" "$1"
}
testutil_const() { go_const "${ROOT}/test/testutil/require.go" "$1"; }
K3S_IMAGE="$(testutil_const StandinK3sImage)"
TOOLS_IMAGE="$(testutil_const StandinToolsImage)"
REGISTRY_IMAGE="$(testutil_const StandinRegistryImage)"
PAUSE_IMAGE="$(testutil_const StandinPauseImage)"
SRIOVDP_IMAGE="$(testutil_const StandinDevicePluginImage)"
SRIOV_CNI_IMAGE="$(testutil_const StandinSRIOVCNIImage)"
# Images built from upstream modules carry the product's upstream names.
FLANNEL_IMAGE="$(go_const "${ROOT}/pkg/cni/images.go" FlannelImage)"
FLANNEL_CNI_IMAGE="$(testutil_const StandinFlannelCNIPluginImage)"
MULTUS_IMAGE="$(go_const "${ROOT}/pkg/cni/images.go" MultusImage)"
# pkg/cni/nri.go: const NRIImage = "REPO:" + NRIVersion.
NRI_IMAGE="$(sed -n 's/^const NRIImage = "\([^"]*\)" + NRIVersion$/\1/p' "${ROOT}/pkg/cni/nri.go")$(sed -n 's/^const NRIVersion = "\([^"]*\)"$/\1/p' "${ROOT}/pkg/cni/nri.go")"
BUSYBOX_IMAGE="$(testutil_const StandinBusyboxImage)"
# The rig's registry, serving every component image under the repository
# path of the upstream name the product deploys (testutil.RigImageMirror).
RIG_REGISTRY=sriov-lane-rig-registry
RIG_REGISTRY_PORT="${SRIOV_LANE_RIG_REGISTRY_PORT:-5055}"

log() { printf 'test-env: %s\n' "$*"; }
warn() { printf 'test-env: WARNING: %s\n' "$*" >&2; }
die() { printf 'test-env: ERROR: %s\n' "$*" >&2; exit 1; }

PHASE_NAME=""
PHASE_START=0
phase() {
	phase_end
	PHASE_NAME="$1"
	PHASE_START=$(date +%s.%N)
}
phase_end() {
	if [[ -n "${PHASE_NAME}" ]]; then
		local now
		now=$(date +%s.%N)
		awk -v n="${PHASE_NAME}" -v a="${PHASE_START}" -v b="${now}" 'BEGIN { printf "test-env: phase %-22s %6.1fs\n", n, b - a }'
		PHASE_NAME=""
	fi
}

[[ $(id -u) -eq 0 ]] || die "must run as root (installs packages, configures dockerd)"
[[ -f "${ROOT}/test/testutil/require.go" ]] || die "test/testutil/require.go missing: cannot learn image names"
[[ -n "${K3S_IMAGE}" && -n "${TOOLS_IMAGE}" && -n "${REGISTRY_IMAGE}" && -n "${PAUSE_IMAGE}" && -n "${SRIOVDP_IMAGE}" && -n "${SRIOV_CNI_IMAGE}" ]] || die "could not read image names from test/testutil/require.go"

# Several engineers (and CI) may run this at once on one machine: serialise
# so caches, daemon.json and image tags are written by one run at a time.
mkdir -p "${CACHE_ROOT}"
exec 9>"${CACHE_ROOT}/test-env.lock"
flock 9

# ---------------------------------------------------------------- packages
phase packages
need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
pkg_installed() { [[ "$(dpkg-query -W -f '${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]; }
pkg_installed busybox-static || need_pkgs+=(busybox-static)
pkg_installed iptables || need_pkgs+=(iptables)
command -v jq >/dev/null 2>&1 || need_pkgs+=(jq)
if ((${#need_pkgs[@]})); then
	log "installing ${need_pkgs[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
command -v go >/dev/null 2>&1 || die "go not found (expected /usr/local/go/bin/go)"
BUSYBOX=/bin/busybox
[[ -x "${BUSYBOX}" ]] || die "${BUSYBOX} missing after installing busybox-static"

# ---------------------------------------------------------------- runc shim
phase runc-wrapper
build_go_binary() { # dir out: rebuild only when the source is newer
	local src="$1" out="$2"
	if [[ ! -x "${out}" ]] || [[ -n "$(find "${src}" -name '*.go' -newer "${out}" -print -quit)" ]]; then
		(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${out}.tmp" "./${src#"${ROOT}/"}") && mv -f "${out}.tmp" "${out}"
	fi
}
build_go_binary "${ROOT}/hack/runc-wrapper" "${WRAPPER}"

# ---------------------------------------------------------------- dockerd
# Several rig lanes at once (make test runs four) put a dozen kubelets,
# containerds, flanneld and Multus daemons on root's one inotify budget,
# 128 instances by default: pods then fail with "too many open files".
# kind's known-issues page gives the same fix; `sriov-lane check` warns.
phase host-limits
for kv in fs.inotify.max_user_instances=1024 fs.inotify.max_user_watches=524288; do
	cur="$(sysctl -n "${kv%%=*}")"
	(( cur >= ${kv#*=} )) || sysctl -qw "${kv}" || warn "could not set ${kv} (now ${cur}): parallel rig lanes may fail with \"too many open files\""
done

phase dockerd
mkdir -p "$(dirname "${DAEMON_JSON}")"
current='{}'
if [[ -s "${DAEMON_JSON}" ]]; then
	current="$(cat "${DAEMON_JSON}")"
	jq -e 'type == "object"' >/dev/null <<<"${current}" || die "${DAEMON_JSON} is not a JSON object; fix it by hand"
fi
wanted="$(jq --arg p "${WRAPPER}" '.runtimes = ((.runtimes // {}) + {"sriov-lane-runc": {"path": $p}}) | .["default-runtime"] = "sriov-lane-runc"' <<<"${current}")"
config_changed=0
if [[ "$(jq -S . <<<"${current}")" != "$(jq -S . <<<"${wanted}")" ]]; then
	[[ -s "${DAEMON_JSON}" ]] && cp -f "${DAEMON_JSON}" "${DAEMON_JSON}.sriov-lane.bak"
	printf '%s\n' "${wanted}" >"${DAEMON_JSON}.tmp"
	mv -f "${DAEMON_JSON}.tmp" "${DAEMON_JSON}"
	config_changed=1
	log "updated ${DAEMON_JSON} (default runtime sriov-lane-runc)"
fi

dockerd_pid() {
	local pid
	pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
	if [[ -n "${pid}" ]] && [[ "$(cat "/proc/${pid}/comm" 2>/dev/null)" == dockerd ]]; then
		echo "${pid}"
	fi
}
wait_docker() {
	local i
	for ((i = 0; i < 120; i++)); do
		docker info >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}
start_dockerd() {
	log "starting dockerd (log: ${DOCKERD_LOG})"
	# 9>&-: the daemon must not inherit (and so hold forever) our lock.
	# setsid: dockerd must outlive the shell and process group that started it.
	setsid nohup dockerd >>"${DOCKERD_LOG}" 2>&1 </dev/null 9>&- &
	disown || true
	wait_docker || die "dockerd did not answer within 60 s; see ${DOCKERD_LOG}"
}
default_runtime() { docker info --format '{{.DefaultRuntime}}' 2>/dev/null || true; }

pid="$(dockerd_pid)"
if [[ -z "${pid}" ]]; then
	start_dockerd
elif ((config_changed)) || [[ "$(default_runtime)" != sriov-lane-runc ]]; then
	wait_docker || die "dockerd (pid ${pid}) does not answer"
	# dockerd reloads runtimes and default-runtime on SIGHUP: no restart, no
	# disturbance to containers of other users.
	kill -HUP "${pid}"
	sleep 1
	if [[ "$(default_runtime)" != sriov-lane-runc ]]; then
		if [[ -z "$(docker ps -q)" ]]; then
			log "restarting dockerd (pid ${pid}) to apply ${DAEMON_JSON}; no containers are running"
			kill "${pid}"
			for ((i = 0; i < 60; i++)); do [[ -d "/proc/${pid}" ]] || break; sleep 0.5; done
			start_dockerd
		else
			warn "dockerd does not use sriov-lane-runc and containers are running: not restarting; privileged containers may fail with 'unable to apply caps'"
		fi
	fi
fi
[[ "$(default_runtime)" == sriov-lane-runc ]] || warn "dockerd default runtime is '$(default_runtime)', not sriov-lane-runc"

# ---------------------------------------------------------------- tools
# kube-apiserver and etcd come from Go modules (no release downloads are
# reachable). CGO_ENABLED=0 because they also run inside FROM-scratch images.
phase kube-apiserver+etcd
sha_of() { sha256sum "$1" | cut -c1-64; }
TOOLS_DIR="${ROOT}/hack/tools"
TOOLS_CACHE="${CACHE_ROOT}/tools/$(sha_of "${TOOLS_DIR}/go.sum")"
K8S_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean"
build_tool() { # module-dir cache-dir name package ldflags
	local dir="$1" cache="$2" name="$3" pkg="$4" ldflags="$5"
	[[ -x "${cache}/${name}" ]] && return 0
	mkdir -p "${cache}"
	log "building ${name} (${pkg}); first build takes minutes"
	(cd "${dir}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "${ldflags}" -o "${cache}/${name}.tmp.$$" "${pkg}") || return 1
	mv -f "${cache}/${name}.tmp.$$" "${cache}/${name}"
}
# build_tools MODULE-DIR KEY-SALT "ENV..." "GO BUILD FLAGS..." PKG[=NAME]...
# (ENV and FLAGS are shell words, quoted as on a command line):
# builds every package in ONE `go build -o DIR/` (shared packages compile
# once) into /var/cache/sriov-lane/tools/<sha256 of go.sum + salt + env +
# flags>/ and sets TOOLS_OUT to that directory. A package's binary is named
# after its last path element unless =NAME renames it. Nothing is built
# when every binary is already cached.
build_tools() {
	local dir="$1" salt="$2" env="$3" flags="$4"
	shift 4
	local key
	key="$({ cat "${dir}/go.sum"; printf '%s\n' "${salt}" "${env}" "${flags}" "$@"; } | sha256sum | cut -c1-64)"
	TOOLS_OUT="${CACHE_ROOT}/tools/${key}"
	local spec pkgs=() missing=0
	for spec in "$@"; do
		pkgs+=("${spec%%=*}")
		[[ -x "${TOOLS_OUT}/$(tool_name "${spec}")" ]] || missing=1
	done
	((missing)) || return 0
	local tmp="${TOOLS_OUT}.tmp.$$" start
	rm -rf "${tmp}"
	mkdir -p "${tmp}"
	start=$(date +%s)
	log "building $(for spec in "$@"; do printf '%s ' "$(tool_name "${spec}")"; done)(${dir#"${ROOT}/"}); a cold build takes minutes"
	local -a ev fl
	eval "ev=(${env})"
	eval "fl=(${flags})"
	(cd "${dir}" && env "${ev[@]}" GOFLAGS=-mod=mod go build -trimpath "${fl[@]}" -o "${tmp}/" "${pkgs[@]}") || { rm -rf "${tmp}"; return 1; }
	for spec in "$@"; do
		if [[ "${spec}" == *=* ]]; then
			local built
			built="$(basename "${spec%%=*}")"
			[[ "${built}" =~ ^v[0-9]+$ ]] && built="$(basename "$(dirname "${spec%%=*}")")"
			mv -f "${tmp}/${built}" "${tmp}/${spec#*=}"
		fi
	done
	mkdir -p "${TOOLS_OUT}"
	for spec in "$@"; do
		mv -f "${tmp}/$(tool_name "${spec}")" "${TOOLS_OUT}/"
	done
	rm -rf "${tmp}"
	log "built in $(($(date +%s) - start)) s into ${TOOLS_OUT}"
}
tool_name() { if [[ "$1" == *=* ]]; then printf '%s' "${1#*=}"; else basename "$1"; fi; }
mkdir -p "${ASSETS}"

# The control plane and the node's kube components: one module
# (k8s.io/kubernetes v1.36.3), one invocation. CGO_ENABLED=0: they run in
# FROM-scratch images.
build_tools "${TOOLS_DIR}" k8s "CGO_ENABLED=0" "-ldflags='${K8S_LDFLAGS}'" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet \
	k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy \
	go.etcd.io/etcd/server/v3=etcd
K8S_BIN="${TOOLS_OUT}"
for b in kube-apiserver etcd kubelet kube-controller-manager kube-scheduler kube-proxy; do
	ln -sfn "${K8S_BIN}/${b}" "${ASSETS}/${b}"
done

# The node's container runtime (hack/tools/node): containerd v2 + ctr and
# the reference CNI plugins (CGO_ENABLED=0, no btrfs/devmapper/zfs), the
# runc shim (no_grpc), and runc, which needs cgo and libseccomp (kubelet
# asks for the RuntimeDefault seccomp profile): a static-pie against
# Debian's libseccomp.a, unpacked from its package, not installed.
phase node-runtime
NODE_DIR="${TOOLS_DIR}/node"
CTRD_LDFLAGS="-s -w -X github.com/containerd/containerd/v2/version.Version=v2.4.2"
build_tools "${NODE_DIR}" ctrd "CGO_ENABLED=0" "-tags=no_btrfs,no_devmapper,no_zfs -ldflags='${CTRD_LDFLAGS}'" \
	github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr \
	github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/main/loopback \
	github.com/containernetworking/plugins/plugins/ipam/host-local github.com/containernetworking/plugins/plugins/meta/portmap \
	github.com/containernetworking/plugins/plugins/meta/bandwidth github.com/containernetworking/plugins/plugins/meta/firewall
CTRD_BIN="${TOOLS_OUT}"
build_tools "${NODE_DIR}" shim "CGO_ENABLED=0" "-tags=no_grpc,no_btrfs,no_devmapper,no_zfs -ldflags='${CTRD_LDFLAGS}'" \
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
SHIM_BIN="${TOOLS_OUT}"
SECCOMP_DIR="${CACHE_ROOT}/libseccomp-dev"
if [[ ! -f "${SECCOMP_DIR}/root/usr/include/seccomp.h" ]]; then
	rm -rf "${SECCOMP_DIR}"
	mkdir -p "${SECCOMP_DIR}"
	(cd "${SECCOMP_DIR}" && { apt-get download libseccomp-dev >/dev/null 2>&1 || { apt-get update -qq && apt-get download libseccomp-dev >/dev/null; }; }) || die "apt-get download libseccomp-dev failed"
	dpkg -x "${SECCOMP_DIR}"/libseccomp-dev_*.deb "${SECCOMP_DIR}/root"
fi
SC="${SECCOMP_DIR}/root"
SC_LIB="$(dirname "$(find "${SC}" -name libseccomp.a | head -1)")"
build_tools "${NODE_DIR}" "runc $(basename "${SECCOMP_DIR}"/libseccomp-dev_*.deb)" \
	"CGO_ENABLED=1 CGO_CFLAGS=-I${SC}/usr/include CGO_LDFLAGS=-L${SC_LIB} PKG_CONFIG_PATH=${SC_LIB}/pkgconfig PKG_CONFIG_SYSROOT_DIR=${SC}" \
	"-buildmode=pie -tags=seccomp,netgo,osusergo -ldflags='-s -w -X main.version=1.5.3 -linkmode external -extldflags -static-pie'" \
	github.com/opencontainers/runc
RUNC_BIN="${TOOLS_OUT}"
for b in containerd ctr bridge loopback host-local portmap bandwidth firewall; do ln -sfn "${CTRD_BIN}/${b}" "${ASSETS}/${b}"; done
ln -sfn "${SHIM_BIN}/containerd-shim-runc-v2" "${ASSETS}/containerd-shim-runc-v2"
ln -sfn "${RUNC_BIN}/runc" "${ASSETS}/runc"

# Flannel v0.28.9 (hack/tools/flannel): flanneld as upstream's Makefile
# builds it on amd64 (cgo for the udp backend, static, version ldflag) and
# install-conf (CGO_ENABLED=0), as images/Dockerfile@v0.28.9 builds them.
phase flannel
FLANNEL_DIR="${TOOLS_DIR}/flannel"
build_tools "${FLANNEL_DIR}" flanneld "CGO_ENABLED=1" \
	"-tags=netgo,osusergo -ldflags='-s -w -X github.com/flannel-io/flannel/pkg/version.Version=v0.28.9 -extldflags -static'" \
	github.com/flannel-io/flannel=flanneld
FLANNELD_BIN="${TOOLS_OUT}/flanneld"
build_tools "${FLANNEL_DIR}" install-conf "CGO_ENABLED=0" "-ldflags='-s -w'" \
	github.com/flannel-io/flannel/cmd/install_conf=install-conf
INSTALL_CONF_BIN="${TOOLS_OUT}/install-conf"

# Multus v4.3.0 (hack/tools/multus) as hack/build-go.sh@v4.3.0 builds it
# (CGO_ENABLED=0, its version ldflags), one invocation: the programs a
# lane's thick DaemonSet runs (install_multus, multus-daemon) and the two
# install_multus copies to the node (multus-shim and passthru:
# cmd/install_multus/main.go@v4.3.0). Upstream's image has four more
# (thin plugin, thin entrypoint, kubeconfig generator, cert-approver) no
# lane runs; at ~35 MB each they doubled what every node pulls and unpacks
# on every rig up.
phase multus
MULTUS_PKG=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
MULTUS_PROGRAMS=(multus-daemon multus-shim install_multus passthru)
build_tools "${TOOLS_DIR}/multus" multus "CGO_ENABLED=0" \
	"-ldflags='-s -w -X ${MULTUS_PKG}/pkg/multus.version=v4.3.0 -X ${MULTUS_PKG}/pkg/multus.gitTreeState=clean -X ${MULTUS_PKG}/pkg/multus.releaseStatus=,released'" \
	${MULTUS_PKG}/cmd/multus-daemon ${MULTUS_PKG}/cmd/multus-shim ${MULTUS_PKG}/cmd/install_multus \
	${MULTUS_PKG}/cmd/passthru-cni=passthru
MULTUS_BIN="${TOOLS_OUT}"

# network-resources-injector v1.9.0 (hack/tools/nri): webhook and
# installer as scripts/build.sh@v1.9.0 builds them (CGO_ENABLED=0,
# -tags no_openssl, -ldflags "-s -w"), one invocation.
phase nri
NRI_PKG=github.com/k8snetworkplumbingwg/network-resources-injector
build_tools "${TOOLS_DIR}/nri" nri "CGO_ENABLED=0" "-tags=no_openssl -ldflags='-s -w'" \
	${NRI_PKG}/cmd/webhook ${NRI_PKG}/cmd/installer
NRI_BIN="${TOOLS_OUT}"

REGISTRY_DIR="${TOOLS_DIR}/registry"
REGISTRY_BIN=""
if [[ -f "${REGISTRY_DIR}/go.sum" ]]; then
	phase registry
	REGISTRY_CACHE="${CACHE_ROOT}/tools/registry-$(sha_of "${REGISTRY_DIR}/go.sum")"
	if build_tool "${REGISTRY_DIR}" "${REGISTRY_CACHE}" registry github.com/distribution/distribution/v3/cmd/registry "-s -w"; then
		REGISTRY_BIN="${REGISTRY_CACHE}/registry"
		ln -sfn "${REGISTRY_BIN}" "${ASSETS}/registry"
	else
		warn "registry did not build: no stand-in registry image"
	fi
fi

# ---------------------------------------------------------------- images
# Stand-in binaries are built with -buildvcs=false: the stand-ins with a
# go.mod of their own would carry this checkout's commit and dirty bit, so
# every commit would rebuild their images (and the node image holding
# them) although nothing in them changed.
phase standin-k3s-binary
mkdir -p "${ROOT}/bin/standin"
printf '*\n' >"${ROOT}/bin/.gitignore"
STANDIN_BIN="${ROOT}/bin/standin/k3s"
(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "${STANDIN_BIN}.tmp" ./test/standin/k3s)
if cmp -s "${STANDIN_BIN}.tmp" "${STANDIN_BIN}"; then rm -f "${STANDIN_BIN}.tmp"; else mv -f "${STANDIN_BIN}.tmp" "${STANDIN_BIN}"; fi

HASH_LABEL=io.sriov-lane.standin.content-hash
# build_image TAG DOCKERFILE-BODY "K3S-LINK..." SRC:DEST... — rebuilds only when
# the hash of the inputs differs from the label on the existing image.
# IMAGE_BUSYBOX=0 leaves busybox out; IMAGE_HASH_EXTRA is hashed with the inputs;
# IMAGE_LINKS holds "PATH=TARGET" symlinks to add.
build_image() {
	local tag="$1" body="$2" k3s_links="$3"
	shift 3
	local hash spec with_busybox="${IMAGE_BUSYBOX:-1}"
	hash="$({
		printf '%s\n' "${body}" "${k3s_links}"
		# Only when set, so images built without them (other branches share
		# this dockerd and tags like the registry's) keep their hash.
		[[ "${with_busybox}" == 1 ]] || printf 'no busybox\n'
		[[ -z "${IMAGE_HASH_EXTRA:-}" ]] || printf '%s\n' "${IMAGE_HASH_EXTRA}"
		[[ -z "${IMAGE_LINKS:-}" ]] || printf '%s\n' "${IMAGE_LINKS}"
		sha_of "${BUSYBOX}"
		for spec in "$@"; do
			printf '%s %s\n' "${spec#*:}" "$(sha_of "${spec%%:*}")"
		done
		"${BUSYBOX}" --list | sort
	} | sha256sum | cut -c1-64)"
	local have
	have="$(docker image inspect -f "{{index .Config.Labels \"${HASH_LABEL}\"}}" "${tag}" 2>/dev/null || true)"
	if [[ "${have}" == "${hash}" && "${SRIOV_LANE_FORCE_IMAGES:-0}" != 1 ]]; then
		log "${tag} up to date"
		return 0
	fi
	local ctx
	ctx="$(mktemp -d /tmp/sriov-lane-standin-ctx.XXXXXX)"
	mkdir -p "${ctx}/rootfs/bin" "${ctx}/rootfs/tmp" "${ctx}/rootfs/etc" "${ctx}/rootfs/var/log" "${ctx}/rootfs/run" "${ctx}/rootfs/root" "${ctx}/rootfs/output"
	chmod 1777 "${ctx}/rootfs/tmp"
	local applet
	if [[ "${with_busybox}" == 1 ]]; then
		cp "${BUSYBOX}" "${ctx}/rootfs/bin/busybox"
		for applet in $("${BUSYBOX}" --list); do
			[[ "${applet}" == busybox ]] || ln -s busybox "${ctx}/rootfs/bin/${applet}"
		done
	fi
	for applet in ${k3s_links}; do
		ln -sfn k3s "${ctx}/rootfs/bin/${applet}"
	done
	local link
	for link in ${IMAGE_LINKS:-}; do
		mkdir -p "${ctx}/rootfs$(dirname "${link%%=*}")"
		ln -sfn "${link#*=}" "${ctx}/rootfs${link%%=*}"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\n' >"${ctx}/rootfs/etc/passwd"
	printf 'root:x:0:\n' >"${ctx}/rootfs/etc/group"
	for spec in "$@"; do
		mkdir -p "${ctx}/rootfs$(dirname "${spec#*:}")"
		cp -L "${spec%%:*}" "${ctx}/rootfs${spec#*:}"
	done
	printf 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin:/sbin:/usr/bin:/usr/sbin\n%s\nLABEL %s=%s\n' "${body}" "${HASH_LABEL}" "${hash}" >"${ctx}/Dockerfile"
	local old
	old="$(docker image inspect -f '{{.Id}}' "${tag}" 2>/dev/null || true)"
	log "building image ${tag}"
	if ! DOCKER_BUILDKIT=0 docker build -q -t "${tag}" "${ctx}" >/dev/null 2>"${ctx}.log"; then
		cat "${ctx}.log" >&2
		rm -rf "${ctx}" "${ctx}.log"
		die "building ${tag} failed"
	fi
	rm -rf "${ctx}" "${ctx}.log"
	# The replaced image is dangling now; drop it unless a container uses it.
	# The build cache can hand back the very same image: only a replaced one
	# (now untagged) may go.
	local new
	new="$(docker image inspect -f '{{.Id}}' "${tag}")"
	if [[ -n "${old}" && "${old}" != "${new}" ]]; then
		local out
		out="$(docker image rm "${old}" 2>&1)" || warn "replaced image ${old} of ${tag} not removed: ${out}"
	fi
}

# flannel's CNI plugin stand-in (test/standin/flannelcni): in the node's
# /bin as rancher/k3s ships flannel there, and as /flannel in the stand-in
# of flannel-cni-plugin's image.
phase flannel-cni
FLANNEL_CNI_BIN="${ROOT}/bin/standin/flannel"
(cd "${ROOT}/test/standin/flannelcni" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -buildvcs=false -ldflags "-s -w" -o "${FLANNEL_CNI_BIN}.tmp" .)
if cmp -s "${FLANNEL_CNI_BIN}.tmp" "${FLANNEL_CNI_BIN}"; then rm -f "${FLANNEL_CNI_BIN}.tmp"; else mv -f "${FLANNEL_CNI_BIN}.tmp" "${FLANNEL_CNI_BIN}"; fi

# The sandbox image containerd pins in the nodes: a stand-in pause built
# here (test/standin/pause), saved into the node image's airgap images
# directory, which the stand-in k3s imports at start as k3s does.
phase image-pause
PAUSE_BIN="${ROOT}/bin/standin/pause"
(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "${PAUSE_BIN}.tmp" ./test/standin/pause)
if cmp -s "${PAUSE_BIN}.tmp" "${PAUSE_BIN}"; then rm -f "${PAUSE_BIN}.tmp"; else mv -f "${PAUSE_BIN}.tmp" "${PAUSE_BIN}"; fi
IMAGE_BUSYBOX=0 build_image "${PAUSE_IMAGE}" 'ENTRYPOINT ["/pause"]' "" "${PAUSE_BIN}:/pause"
PAUSE_ID="$(docker image inspect -f '{{.Id}}' "${PAUSE_IMAGE}")"
PAUSE_TAR="${ROOT}/bin/standin/pause.tar"
if [[ "$(cat "${PAUSE_TAR}.id" 2>/dev/null)" != "${PAUSE_ID}" ]]; then
	docker save -o "${PAUSE_TAR}.tmp" "${PAUSE_IMAGE}"
	mv -f "${PAUSE_TAR}.tmp" "${PAUSE_TAR}"
	printf '%s\n' "${PAUSE_ID}" >"${PAUSE_TAR}.id"
fi

phase image-k3s
# The node image: the stand-in k3s supervisor as /bin/k3s and the real
# components it starts, in rancher/k3s's places (k3s-io/k3s
# package/Dockerfile: k3s's data archive unpacked at /, binaries and CNI
# plugins in /bin, iptables in /bin/aux, these VOLUMEs).
# /var/lib/rancher/k3s holds containerd's root (agent/containerd), so it is
# a Docker volume, as overlayfs snapshots cannot live on the container's
# own overlay. k3s links kubectl to its multi-call binary; the stand-in
# answers kubectl (k3d's uncordon/drain) itself. ctr is the real one,
# pointed at k3s's containerd socket and namespace as k3s's ctr defaults
# to. iptables (kube-proxy, CNI plugins, k3d's DNS fix) is Debian's
# iptables-nft with the libraries it loads.
node_files=("${STANDIN_BIN}:/bin/k3s" "${PAUSE_TAR}:/var/lib/rancher/k3s/agent/images/sriov-lane-standin-pause.tar" "${FLANNEL_CNI_BIN}:/bin/flannel")
for b in kube-apiserver etcd kube-controller-manager kube-scheduler kubelet kube-proxy containerd containerd-shim-runc-v2 ctr runc \
	bridge loopback host-local portmap bandwidth firewall; do
	node_files+=("${ASSETS}/${b}:/bin/${b}")
done
XTABLES=/usr/sbin/xtables-nft-multi
[[ -x "${XTABLES}" ]] || die "${XTABLES} missing (Debian package iptables)"
# iptables_files DIR: Debian's iptables-nft, its libraries and extensions
# into the file list xt_files, and links to it from DIR into xt_links.
iptables_files() {
	local dir="$1" lib ext l
	xt_files=("${XTABLES}:${dir}/xtables-nft-multi" /etc/protocols:/etc/protocols /etc/services:/etc/services)
	for lib in $(ldd "${XTABLES}" | awk '/=>/ { print $3 } /^[[:space:]]*\// { print $1 }'); do
		xt_files+=("${lib}:${lib}")
	done
	for ext in /usr/lib/x86_64-linux-gnu/xtables/*.so; do
		xt_files+=("${ext}:${ext}")
	done
	xt_links=""
	for l in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore \
		iptables-nft iptables-nft-save iptables-nft-restore ip6tables-nft ip6tables-nft-save ip6tables-nft-restore; do
		xt_links+=" ${dir}/${l}=xtables-nft-multi"
	done
}
iptables_files /bin/aux
node_files+=("${xt_files[@]}")
IMAGE_LINKS="${xt_links}" IMAGE_HASH_EXTRA="pause ${PAUSE_ID}" build_image "${K3S_IMAGE}" 'ENV PATH=/bin/aux:/bin:/sbin:/usr/bin:/usr/sbin CONTAINERD_ADDRESS=/run/k3s/containerd/containerd.sock CONTAINERD_NAMESPACE=k8s.io
VOLUME /var/lib/kubelet /var/lib/rancher/k3s /var/lib/cni /var/log
ENTRYPOINT ["/bin/k3s"]
CMD ["agent"]' "kubectl" "${node_files[@]}"

# The SR-IOV device plugin stand-in (its upstream module is refused):
# upstream's args go to its entrypoint as with the real image.
phase image-sriovdp
SRIOVDP_BIN="${ROOT}/bin/standin/sriovdp"
(cd "${ROOT}/test/standin/sriovdp" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -buildvcs=false -ldflags "-s -w" -o "${SRIOVDP_BIN}.tmp" .)
if cmp -s "${SRIOVDP_BIN}.tmp" "${SRIOVDP_BIN}"; then rm -f "${SRIOVDP_BIN}.tmp"; else mv -f "${SRIOVDP_BIN}.tmp" "${SRIOVDP_BIN}"; fi
build_image "${SRIOVDP_IMAGE}" 'ENTRYPOINT ["/usr/bin/sriovdp"]' "" "${SRIOVDP_BIN}:/usr/bin/sriovdp"

# The sriov-cni stand-in (its upstream module is refused), laid out as the
# upstream image (k8snetworkplumbingwg/sriov-cni Dockerfile@v2.10.0): the
# plugin at /usr/bin/sriov and /entrypoint.sh as the entrypoint, which the
# product's DaemonSet runs without arguments to copy it into
# /host/opt/cni/bin and sleep; busybox gives it sh, awk, cp and sleep.
phase image-sriov-cni
SRIOV_CNI_BIN="${ROOT}/bin/standin/sriov"
(cd "${ROOT}/test/standin/sriovcni" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -buildvcs=false -ldflags "-s -w" -o "${SRIOV_CNI_BIN}.tmp" .)
if cmp -s "${SRIOV_CNI_BIN}.tmp" "${SRIOV_CNI_BIN}"; then rm -f "${SRIOV_CNI_BIN}.tmp"; else mv -f "${SRIOV_CNI_BIN}.tmp" "${SRIOV_CNI_BIN}"; fi
build_image "${SRIOV_CNI_IMAGE}" 'ENTRYPOINT ["/entrypoint.sh"]' "" \
	"${SRIOV_CNI_BIN}:/usr/bin/sriov" "${ROOT}/test/standin/sriovcni/entrypoint.sh:/entrypoint.sh"

# Flannel from its module, under its upstream name: the layout of
# images/Dockerfile@v0.28.9 (/opt/bin/flanneld, /opt/bin/install-conf,
# iptables) on busybox instead of alpine (the product's init container
# uses cp).
phase image-flannel
iptables_files /usr/sbin
IMAGE_LINKS="${xt_links} /var/run=/run" build_image "${FLANNEL_IMAGE}" 'ENTRYPOINT ["/opt/bin/flanneld"]' "" \
	"${FLANNELD_BIN}:/opt/bin/flanneld" "${INSTALL_CONF_BIN}:/opt/bin/install-conf" "${xt_files[@]}"

phase image-flannel-cni-plugin
build_image "${FLANNEL_CNI_IMAGE}" 'CMD ["/bin/sh"]' "" "${FLANNEL_CNI_BIN}:/flannel"

# Multus thick under its upstream name, laid out as
# images/Dockerfile.thick@v4.3.0: programs in /usr/src/multus-cni/bin (the
# ones a lane runs, see above), the daemon as entrypoint; busybox instead
# of debian:stable-slim.
phase image-multus
multus_files=()
for b in "${MULTUS_PROGRAMS[@]}"; do
	multus_files+=("${MULTUS_BIN}/${b}:/usr/src/multus-cni/bin/${b}")
done
# /var/run is a link to /run as in debian:stable-slim: the product mounts the
# node's /var/run/netns at /run/netns, and the daemon opens the netns paths
# containerd hands it (/var/run/netns/cni-...) through that link.
IMAGE_LINKS="/var/run=/run" build_image "${MULTUS_IMAGE}" 'ENTRYPOINT ["/usr/src/multus-cni/bin/multus-daemon"]' "" "${multus_files[@]}"

# network-resources-injector under its upstream name, laid out as
# Dockerfile@v1.9.0: webhook and installer in /usr/bin, found through
# PATH (the product's container runs `command: [webhook]`), USER 1001,
# CMD ["webhook"]; busybox instead of alpine, with alpine's PATH.
phase image-nri
[[ "${NRI_IMAGE}" == */network-resources-injector:v* ]] || die "could not read NRIImage from pkg/cni/nri.go (got '${NRI_IMAGE}')"
build_image "${NRI_IMAGE}" 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER 1001
CMD ["webhook"]' "" "${NRI_BIN}/webhook:/usr/bin/webhook" "${NRI_BIN}/installer:/usr/bin/installer"

phase image-tools
build_image "${TOOLS_IMAGE}" 'ENTRYPOINT ["/bin/k3s"]
CMD ["noop"]' "" "${STANDIN_BIN}:/bin/k3s"

phase image-busybox
build_image "${BUSYBOX_IMAGE}" 'CMD ["sh"]' ""

[[ -n "${REGISTRY_BIN}" ]] || die "the registry did not build: rig lanes get their images from it"
if [[ -n "${REGISTRY_BIN}" ]]; then
	phase image-registry
	regcfg="${CACHE_ROOT}/registry-config.yml"
	cat >"${regcfg}.tmp" <<'YAML'
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: /var/lib/registry
  delete:
    enabled: true
http:
  addr: :5000
YAML
	mv -f "${regcfg}.tmp" "${regcfg}"
	build_image "${REGISTRY_IMAGE}" 'EXPOSE 5000
ENTRYPOINT ["/bin/registry"]
CMD ["serve", "/etc/docker/registry/config.yml"]' "" "${REGISTRY_BIN}:/bin/registry" "${regcfg}:/etc/docker/registry/config.yml"
fi

# ---------------------------------------------------------------- rig registry
# Rig lanes get their component images the way users' lanes can: through
# imageRegistryMirror, from a registry that serves them under the
# repository paths of their upstream names (k8snetworkplumbingwg/multus-cni,
# flannel-io/flannel, library/busybox, ...). It runs on the host network, so
# nodes on any Docker network reach it at the default bridge's gateway
# address; its storage is cached, so warm pushes only compare digests.
phase rig-registry
# lane-rig: the rig's own tool (stand-in PFs for make demo, the registry
# pushes below).
LANE_RIG="${ROOT}/bin/lane-rig"
(cd "${ROOT}" && go build -o "${LANE_RIG}" ./test/rig/cmd/lane-rig)
rig_registry_up() {
	local want have
	want="$(docker image inspect -f '{{.Id}}' "${REGISTRY_IMAGE}")"
	have="$(docker inspect -f '{{.State.Running}} {{.Image}}' "${RIG_REGISTRY}" 2>/dev/null || true)"
	if [[ "${have}" != "true ${want}" ]]; then
		docker rm -f "${RIG_REGISTRY}" >/dev/null 2>&1 || true
		mkdir -p "${CACHE_ROOT}/rig-registry"
		docker run -d --name "${RIG_REGISTRY}" --network host --restart unless-stopped \
			-e "REGISTRY_HTTP_ADDR=0.0.0.0:${RIG_REGISTRY_PORT}" \
			-v "${CACHE_ROOT}/rig-registry:/var/lib/registry" "${REGISTRY_IMAGE}" >/dev/null
	fi
	local i
	for i in $(seq 1 100); do
		"${BUSYBOX}" wget -q -O /dev/null "http://127.0.0.1:${RIG_REGISTRY_PORT}/v2/" 2>/dev/null && return 0
		sleep 0.1
	done
	docker logs --tail 20 "${RIG_REGISTRY}" >&2 || true
	die "rig registry ${RIG_REGISTRY} does not answer on 127.0.0.1:${RIG_REGISTRY_PORT}"
}
rig_registry_up
# repo_path REF: the repository path a mirror serves REF under (the rule of
# pkg/cni.MirrorImage: registry host dropped, Docker Hub's library/ explicit).
repo_path() {
	local ref="$1" first="${1%%/*}"
	if [[ "${ref}" == */* && ( "${first}" == *.* || "${first}" == *:* || "${first}" == localhost ) ]]; then
		ref="${ref#*/}"
	fi
	[[ "${ref%%:*}" == */* ]] || ref="library/${ref}"
	printf '%s' "${ref}"
}
# rig_push LOCAL-IMAGE UPSTREAM-NAME: lane-rig push-image writes the layers
# as plain tar (docker push would gzip them, and each node's containerd
# would spend half its CPU of a rig up gunzipping), and does nothing when
# the registry has the image already.
rig_push() {
	"${LANE_RIG}" push-image --registry "127.0.0.1:${RIG_REGISTRY_PORT}" "$1" "$(repo_path "$2")" >/dev/null ||
		die "pushing $1 to the rig registry as $(repo_path "$2")"
}
rig_push "${FLANNEL_IMAGE}" "${FLANNEL_IMAGE}"
rig_push "${MULTUS_IMAGE}" "${MULTUS_IMAGE}"
rig_push "${NRI_IMAGE}" "${NRI_IMAGE}"
rig_push "${FLANNEL_CNI_IMAGE}" "$(go_const "${ROOT}/pkg/cni/images.go" FlannelCNIPluginImage)"
rig_push "${SRIOVDP_IMAGE}" "$(go_const "${ROOT}/pkg/cni/images.go" DevicePluginImage)"
rig_push "${BUSYBOX_IMAGE}" "$(go_const "${ROOT}/pkg/cni/smoke.go" SmokeImage)"
rig_push "${SRIOV_CNI_IMAGE}" "$(go_const "${ROOT}/pkg/cni/images.go" SRIOVCNIImage)"
gw="$(docker network inspect bridge -f '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}} {{end}}{{end}}' | tr ' ' '\n' | grep -m1 '\.' || true)"
[[ -n "${gw}" ]] || die "cannot find the IPv4 gateway of Docker's default bridge network"
printf 'http://%s:%s\n' "${gw}" "${RIG_REGISTRY_PORT}" >"${ASSETS}/rig-image-mirror"

# Images this script replaced while a container still used them are left
# dangling; drop those no container uses any more (never forced).
for img in $(docker images -q -f dangling=true -f "label=${HASH_LABEL}"); do
	docker image rm "${img}" >/dev/null 2>&1 || true
done

phase_end
log "ready: SRIOV_LANE_TEST_ASSETS=${ASSETS}"
