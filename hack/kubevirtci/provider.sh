#!/usr/bin/env bash
# A drop-in kubevirtci provider backed by sriov-lane.
#
# Copy (or symlink) this file to kubevirtci's cluster-up/cluster/<provider>/provider.sh,
# e.g. cluster-up/cluster/k3d-sriov/provider.sh. sriov-lane itself reads kubevirtci's
# CLUSTER_NAME, PF_COUNT_PER_NODE, PF_BLACKLIST, HOST_PORT and KUBEVIRT_USE_DRA from the
# environment; this file maps the rest:
#   KUBEVIRT_NUM_NODES      total nodes incl. the server (default 3: 1 server + 2 agents)
#   KUBEVIRTCI_CONFIG_PATH  where kubevirtci keeps per-provider files (default _ci-configs)
#   KUBEVIRT_PROVIDER       the provider name (default k3d-sriov)
#   SRIOV_LANE              the sriov-lane binary (default: sriov-lane on PATH)
#   SRIOV_LANE_CONFIG       an optional lane config file
#   ARTIFACTS               when set, down exports the lane's logs there first (CI)
#   CRI_BIN                 docker or podman, read by sriov-lane itself (containerEngine);
#                           ssh.sh and ports use the engine the lane went up on, which
#                           up writes into config-provider-*.sh (sriov_lane_engine)
#
# What kubevirtci's cluster-up scripts call, read in kubevirt/kubevirtci at
# 39bd4947ba4de7f7676ad30cd2df51e7c60efb1b (cited below as @39bd494):
#   up.sh, down.sh   source hack/common.sh and this file, then call up / down; up.sh
#                    also calls _kubectl for KUBEVIRT_SINGLE_STACK=true
#                    (kubevirt/kubevirtci cluster-up/up.sh, cluster-up/down.sh @39bd494)
#   kubectl.sh       sources this file and hack/config.sh, then _kubectl "$@"
#                    (kubevirt/kubevirtci cluster-up/kubectl.sh @39bd494)
#   ssh.sh           sources this file and hack/config.sh, then _ssh_into_node "$@" when
#                    KUBEVIRT_PROVIDER matches kind.* or k3d.*, else
#                    ${_cli} --prefix $provider_prefix ssh "$@"
#                    (kubevirt/kubevirtci cluster-up/ssh.sh @39bd494)
#   cli.sh           ${_cli} --prefix $provider_prefix "$@"
#                    (kubevirt/kubevirtci cluster-up/cli.sh @39bd494)
#   hack/config.sh   sources ${KUBEVIRTCI_CONFIG_PATH}/$KUBEVIRT_PROVIDER/
#                    config-provider-${KUBEVIRT_PROVIDER}.sh, which `sriov-lane up
#                    --kubevirtci` writes (named after the directory's last element)
#                    (kubevirt/kubevirtci cluster-up/hack/config.sh @39bd494)
# _main_ip and _port are the ephemeral providers' helpers that projects around KubeVirt
# call after sourcing a provider (kubevirt/kubevirtci
# cluster-up/cluster/ephemeral-provider-common.sh @39bd494); they are here too.

_sriov_lane_args() {
	local -n _args=$1
	_args=()
	if [[ -n "${SRIOV_LANE_CONFIG:-}" ]]; then
		_args+=(--config "${SRIOV_LANE_CONFIG}")
	fi
}

# The provider's directory: kubevirtci's ${KUBEVIRTCI_CONFIG_PATH}/${KUBEVIRT_PROVIDER}
# (kubevirt/kubevirtci cluster-up/hack/common.sh @39bd494).
_sriov_lane_dir() {
	echo "${KUBEVIRTCI_CONFIG_PATH:-_ci-configs}/${KUBEVIRT_PROVIDER:-k3d-sriov}"
}

function up() {
	local bin="${SRIOV_LANE:-sriov-lane}"
	local nodes="${KUBEVIRT_NUM_NODES:-3}"
	if ! [[ "${nodes}" =~ ^[0-9]+$ ]] || ((nodes < 2)); then
		echo "KUBEVIRT_NUM_NODES must be a number >= 2 (1 server + at least 1 SR-IOV agent), got '${nodes}'" >&2
		return 2
	fi
	local args
	_sriov_lane_args args
	"${bin}" up "${args[@]}" --agents "$((nodes - 1))" --kubevirtci "$(_sriov_lane_dir)"
}

function down() {
	local bin="${SRIOV_LANE:-sriov-lane}"
	local args
	_sriov_lane_args args
	if [[ -n "${ARTIFACTS:-}" ]]; then
		"${bin}" export logs "${args[@]}" "${ARTIFACTS}" || true
	fi
	"${bin}" down "${args[@]}"
}

# _kubectl runs the lane's kubectl against the lane, as kind's does with the files
# up wrote (kubevirt/kubevirtci cluster-up/cluster/kind/common.sh KUBECTL @39bd494).
function _kubectl() {
	local dir
	dir="$(_sriov_lane_dir)"
	"${dir}/.kubectl" --kubeconfig="${dir}/.kubeconfig" "$@"
}

# The lane (k3d cluster) name, from the kubeconfig up wrote: k3d names its
# context k3d-<cluster>.
_sriov_lane_cluster() {
	local kc ctx
	kc="$(_sriov_lane_dir)/.kubeconfig"
	ctx="$(sed -n 's/^current-context:[[:space:]]*//p' "${kc}" 2>/dev/null | tr -d "\"'")"
	if [[ "${ctx}" != k3d-?* ]]; then
		echo "no k3d context in ${kc}: is the lane up?" >&2
		return 1
	fi
	echo "${ctx#k3d-}"
}

# _sriov_lane_engine is the engine CLI of the lane's containers: the one up recorded in
# the provider's config-provider-*.sh, else CRI_BIN, else docker.
_sriov_lane_engine() {
	local dir engine
	dir="$(_sriov_lane_dir)"
	engine="$(sed -n "s/^sriov_lane_engine=//p" "${dir}/config-provider-$(basename "${dir}").sh" 2>/dev/null | tr -d "\"'")"
	echo "${engine:-${CRI_BIN:-docker}}"
}

# _sriov_lane_node maps kubevirtci's node names to the lane's node containers:
# node01 is the server, node02.. the agents (k3d-<lane>-server-0, k3d-<lane>-agent-0..).
# Any other name is taken as it is: the lane's Kubernetes node names are its container
# names, as kind's are (kubevirt/kubevirtci cluster-up/cluster/kind/common.sh
# _ssh_into_node @39bd494).
_sriov_lane_node() {
	local node="$1" cluster n
	if [[ "${node}" =~ ^node0*([1-9][0-9]*)$ ]]; then
		n="${BASH_REMATCH[1]}"
		cluster="$(_sriov_lane_cluster)" || return 1
		if ((n == 1)); then
			echo "k3d-${cluster}-server-0"
		else
			echo "k3d-${cluster}-agent-$((n - 2))"
		fi
		return 0
	fi
	echo "${node}"
}

# _ssh_into_node NODE [COMMAND...]: a shell in the node's container, or COMMAND run
# there. As with ssh (and kubevirtci's gocli ssh), the words of COMMAND are joined and
# run by the node's shell, so `ssh.sh node02 'ls /sys/class/net | wc -l'` works; a
# leading -- is dropped. k3s node images have sh but not always bash.
function _ssh_into_node() {
	if (($# == 0)); then
		echo "usage: _ssh_into_node NODE [COMMAND...]" >&2
		return 2
	fi
	local node
	node="$(_sriov_lane_node "$1")" || return 1
	shift
	if [[ "${1:-}" == "--" ]]; then
		shift
	fi
	if (($# == 0)); then
		local opts=(-i)
		if [[ -t 0 && -t 1 ]]; then
			opts=(-it)
		fi
		"$(_sriov_lane_engine)" exec "${opts[@]}" "${node}" sh -c 'if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh'
	else
		"$(_sriov_lane_engine)" exec -i "${node}" sh -c "$*"
	fi
}

function _main_ip() {
	echo 127.0.0.1
}

# _port registry|k8s: the host port of the lane's registry or Kubernetes API.
function _port() {
	local cluster url hostport
	case "${1:-}" in
	registry)
		cluster="$(_sriov_lane_cluster)" || return 1
		hostport="$("$(_sriov_lane_engine)" port "${cluster}-registry" 5000/tcp | head -n 1)" || return 1
		if [[ -z "${hostport}" ]]; then
			echo "the registry of lane ${cluster} publishes no port" >&2
			return 1
		fi
		echo "${hostport##*:}"
		;;
	k8s)
		url="$(sed -n 's/^[[:space:]]*server:[[:space:]]*//p' "$(_sriov_lane_dir)/.kubeconfig" 2>/dev/null | head -n 1)"
		url="${url%/}"
		if [[ ! "${url##*:}" =~ ^[0-9]+$ ]]; then
			echo "no API server port in $(_sriov_lane_dir)/.kubeconfig: is the lane up?" >&2
			return 1
		fi
		echo "${url##*:}"
		;;
	*)
		echo "usage: _port registry|k8s (got '${1:-}')" >&2
		return 2
		;;
	esac
}

# _cli stands in for kubevirtci's gocli, which this provider has none of: ssh.sh calls
# it for providers not named kind*/k3d*, and cli.sh always does
# (kubevirt/kubevirtci cluster-up/ssh.sh, cluster-up/cli.sh @39bd494).
_cli=_sriov_lane_cli

_sriov_lane_cli() {
	if [[ "${1:-}" == "--prefix" ]]; then
		shift 2 || shift
	fi
	local cmd="${1:-}"
	shift || true
	case "${cmd}" in
	ssh) _ssh_into_node "$@" ;;
	ports) _port "$@" ;;
	*)
		echo "the sriov-lane provider has no gocli: '${cmd}' is not supported (ssh and ports are; up and down are up.sh and down.sh)" >&2
		return 1
		;;
	esac
}

# Run directly: provider.sh up|down (handy outside kubevirtci).
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	set -euo pipefail
	case "${1:-}" in
	up | down) "$1" ;;
	*)
		echo "usage: $0 up|down" >&2
		exit 2
		;;
	esac
fi
