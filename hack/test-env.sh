#!/usr/bin/env bash
# Prepares the hardware-free test environment on a Debian machine (as root):
# Docker with a capability-trimming runc shim, QEMU with the igb device
# (the kernel tier), real kube-apiserver/etcd binaries built from Go
# modules, and the stand-in k3s/k3d-tools/registry images. The host set-up
# is here; the tools, images, rig registry and guest kernels are
# `lane-rig env`'s, which this builds and runs last.
# Idempotent: a second run only checks and takes seconds.
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
# Rootful Podman beside Docker, as a Fedora or RHEL host runs it: the
# netavark backend with aardvark-dns (the nodes find the server by name;
# Debian's podman alone brings CNI without DNS) and catatonit (k3d's nodes
# ask for an init process).
for p in podman netavark aardvark-dns catatonit curl; do
	pkg_installed "${p}" || need_pkgs+=("${p}")
done
if ((${#need_pkgs[@]})); then
	log "installing ${need_pkgs[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
command -v go >/dev/null 2>&1 || die "go not found (expected /usr/local/go/bin/go)"
BUSYBOX=/bin/busybox
[[ -x "${BUSYBOX}" ]] || die "${BUSYBOX} missing after installing busybox-static"

# ---------------------------------------------------------------- qemu
# The kernel tier (test/kernel) boots Debian kernels in QEMU with emulated
# igb NICs (SR-IOV, 7 VFs): bookworm's QEMU 7.2 has no igb device,
# bookworm-backports' has. The suite's entry reuses the URI the machine's
# own Debian sources name, so it goes through whatever mirror they use.
phase qemu
BACKPORTS=/etc/apt/sources.list.d/sriov-lane-bookworm-backports.sources
if [[ ! -s "${BACKPORTS}" ]]; then
	uri="$(awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
	[[ -n "${uri}" ]] || uri="$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)"
	[[ -n "${uri}" ]] || die "no Debian bookworm URI in /etc/apt/sources.list{,.d/*.sources} to reuse for bookworm-backports"
	printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "${uri}" >"${BACKPORTS}.tmp"
	mv -f "${BACKPORTS}.tmp" "${BACKPORTS}"
	apt-get update -qq
fi
has_igb() { qemu-system-x86_64 -device help 2>/dev/null | grep -q '"igb"'; }
if ! has_igb; then
	log "installing qemu-system-x86 from bookworm-backports (bookworm's has no igb device)"
	apt-get install -y -qq -t bookworm-backports --no-install-recommends qemu-system-x86 >/dev/null
	has_igb || die "qemu-system-x86_64 from bookworm-backports has no igb device"
fi

# ---------------------------------------------------------------- runc shim
phase runc-wrapper
# Built every run, as lane-rig is below: Go's build cache is keyed by
# content, so an unchanged wrapper costs a cache hit, and the binary
# dockerd runs is replaced only when its bytes change (no mtimes, which a
# fresh clone or a checkout resets).
(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${WRAPPER}.tmp" ./hack/runc-wrapper)
if cmp -s "${WRAPPER}.tmp" "${WRAPPER}"; then
	rm -f "${WRAPPER}.tmp"
else
	mv -f "${WRAPPER}.tmp" "${WRAPPER}"
fi

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
	# cd /: nor may it keep this checkout as its working directory, which a
	# removed clone or worktree deletes under it and what it starts.
	(
		cd / || exit
		setsid nohup dockerd >>"${DOCKERD_LOG}" 2>&1 </dev/null 9>&- &
	)
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

# ---------------------------------------------------------------- podman
# Podman's API service as podman.socket runs it (k3d-io/k3d
# docs/usage/advanced/podman.md@v5.9.0), with the same runc shim as
# dockerd and the netavark backend. Podman keeps no containers in the
# service: restarting it disturbs none.
phase podman
PODMAN_CONF=/etc/containers/containers.conf.d/50-sriov-lane-rig.conf
PODMAN_SOCK=/run/podman/podman.sock
PODMAN_LOG=/var/log/sriov-lane-podman.log
mkdir -p "$(dirname "${PODMAN_CONF}")" /run/podman
printf '[engine]\nruntime = "sriov-lane-runc"\n\n[engine.runtimes]\nsriov-lane-runc = ["%s"]\n\n[network]\nnetwork_backend = "netavark"\n' "${WRAPPER}" >"${PODMAN_CONF}.tmp"
podman_changed=0
if cmp -s "${PODMAN_CONF}.tmp" "${PODMAN_CONF}"; then
	rm -f "${PODMAN_CONF}.tmp"
else
	mv -f "${PODMAN_CONF}.tmp" "${PODMAN_CONF}"
	podman_changed=1
fi
podman_up() { curl -fsS --unix-socket "${PODMAN_SOCK}" http://podman/_ping >/dev/null 2>&1; }
podman_pids() { pgrep -f "podman system service --time=0 unix://${PODMAN_SOCK}" || true; }
# A service started before this fix may work from a deleted directory.
podman_cwd_gone() {
	local pid
	for pid in $(podman_pids); do
		[[ "$(readlink "/proc/${pid}/cwd")" == *" (deleted)" ]] && return 0
	done
	return 1
}
if ((podman_changed)) || ! podman_up || podman_cwd_gone; then
	for pid in $(podman_pids); do kill "${pid}"; done
	for ((i = 0; i < 40; i++)); do [[ -z "$(podman_pids)" ]] && break; sleep 0.25; done
	log "starting podman's API service at ${PODMAN_SOCK} (log: ${PODMAN_LOG})"
	# From /, as dockerd: conmon inherits the service's working directory
	# and fails every container start once it is deleted ("Failed to get
	# working directory", then "write child: broken pipe").
	(
		cd / || exit
		setsid nohup podman system service --time=0 "unix://${PODMAN_SOCK}" >>"${PODMAN_LOG}" 2>&1 </dev/null 9>&- &
	)
	for ((i = 0; i < 120; i++)); do podman_up && break; sleep 0.25; done
	podman_up || die "podman's API service did not answer within 30 s; see ${PODMAN_LOG}"
fi
[[ "$(podman info --format '{{.Host.NetworkBackend}}')" == netavark ]] || warn "podman's network backend is not netavark: rig lanes on podman cannot resolve their nodes' names"

# ---------------------------------------------------------------- the rest
# The tools built from Go modules, the stand-in images and the rig registry
# serving them are lane-rig env's (test/rig/cmd/lane-rig/env.go), which
# makes each only when what it is made from changed. It needs nothing but
# Go and the module cache to build; exec hands it our lock (fd 9).
phase lane-rig
LANE_RIG="${ROOT}/bin/lane-rig"
mkdir -p "${ROOT}/bin"
(cd "${ROOT}" && go build -o "${LANE_RIG}" ./test/rig/cmd/lane-rig)
phase_end
exec "${LANE_RIG}" env --root "${ROOT}" --cache "${CACHE_ROOT}"
