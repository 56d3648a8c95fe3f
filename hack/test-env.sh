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
CACHE_ROOT=/var/cache/sriov-lane
ASSETS="${ROOT}/bin/test-assets"

# Image names mirror the constants in test/testutil/require.go.
testutil_const() {
	sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\"\\([^\"]*\\)\".*/\\1/p" "${ROOT}/test/testutil/require.go"
}
K3S_IMAGE="$(testutil_const StandinK3sImage)"
TOOLS_IMAGE="$(testutil_const StandinToolsImage)"
REGISTRY_IMAGE="$(testutil_const StandinRegistryImage)"

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
[[ -n "${K3S_IMAGE}" && -n "${TOOLS_IMAGE}" && -n "${REGISTRY_IMAGE}" ]] || die "could not read image names from test/testutil/require.go"

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
build_tool "${TOOLS_DIR}" "${TOOLS_CACHE}" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${K8S_LDFLAGS}"
build_tool "${TOOLS_DIR}" "${TOOLS_CACHE}" etcd go.etcd.io/etcd/server/v3 "-s -w"
mkdir -p "${ASSETS}"
for b in kube-apiserver etcd; do
	ln -sfn "${TOOLS_CACHE}/${b}" "${ASSETS}/${b}"
done

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
phase standin-k3s-binary
mkdir -p "${ROOT}/bin/standin"
printf '*\n' >"${ROOT}/bin/.gitignore"
STANDIN_BIN="${ROOT}/bin/standin/k3s"
(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${STANDIN_BIN}.tmp" ./test/standin/k3s)
if cmp -s "${STANDIN_BIN}.tmp" "${STANDIN_BIN}"; then rm -f "${STANDIN_BIN}.tmp"; else mv -f "${STANDIN_BIN}.tmp" "${STANDIN_BIN}"; fi

HASH_LABEL=io.sriov-lane.standin.content-hash
# build_image TAG DOCKERFILE-BODY "K3S-LINK..." SRC:DEST... — rebuilds only when
# the hash of the inputs differs from the label on the existing image.
build_image() {
	local tag="$1" body="$2" k3s_links="$3"
	shift 3
	local hash spec
	hash="$({
		printf '%s\n' "${body}" "${k3s_links}"
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
	cp "${BUSYBOX}" "${ctx}/rootfs/bin/busybox"
	local applet
	for applet in $("${BUSYBOX}" --list); do
		[[ "${applet}" == busybox ]] || ln -s busybox "${ctx}/rootfs/bin/${applet}"
	done
	for applet in ${k3s_links}; do
		ln -sfn k3s "${ctx}/rootfs/bin/${applet}"
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

phase image-k3s
# k3s links kubectl and the container tools to its multi-call binary; the
# stand-in answers those names itself (see test/standin/k3s/main.go).
build_image "${K3S_IMAGE}" 'ENTRYPOINT ["/bin/k3s"]
CMD ["agent"]' "kubectl crictl ctr iptables-save iptables-restore ip6tables-save ip6tables-restore" \
	"${STANDIN_BIN}:/bin/k3s" "${ASSETS}/kube-apiserver:/bin/kube-apiserver" "${ASSETS}/etcd:/bin/etcd"

phase image-tools
build_image "${TOOLS_IMAGE}" 'ENTRYPOINT ["/bin/k3s"]
CMD ["noop"]' "" "${STANDIN_BIN}:/bin/k3s"

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

# Images this script replaced while a container still used them are left
# dangling; drop those no container uses any more (never forced).
for img in $(docker images -q -f dangling=true -f "label=${HASH_LABEL}"); do
	docker image rm "${img}" >/dev/null 2>&1 || true
done

# ---------------------------------------------------------------- lane-rig
if compgen -G "${ROOT}/test/rig/cmd/lane-rig/*.go" >/dev/null; then
	phase lane-rig
	(cd "${ROOT}" && go build -o "${ROOT}/bin/lane-rig" ./test/rig/cmd/lane-rig)
else
	log "test/rig/cmd/lane-rig has no Go files yet: bin/lane-rig not built"
fi
phase_end
log "ready: SRIOV_LANE_TEST_ASSETS=${ASSETS}"
