#!/usr/bin/env bash
# A drop-in kubevirtci provider backed by sriov-lane.
#
# Copy (or symlink) this file to kubevirtci's cluster-up/cluster/<provider>/provider.sh,
# e.g. cluster-up/cluster/k3d-sriov/provider.sh; kubevirtci's up.sh/down.sh source it and
# call up/down. sriov-lane itself reads kubevirtci's CLUSTER_NAME, PF_COUNT_PER_NODE,
# PF_BLACKLIST and HOST_PORT from the environment; this file maps the rest:
#   KUBEVIRT_NUM_NODES      total nodes incl. the server (default 3: 1 server + 2 agents)
#   KUBEVIRTCI_CONFIG_PATH  where kubevirtci keeps per-provider files (default _ci-configs)
#   KUBEVIRT_PROVIDER       the provider name (default k3d-sriov)
#   SRIOV_LANE              the sriov-lane binary (default: sriov-lane on PATH)
#   SRIOV_LANE_CONFIG       an optional lane config file
#   ARTIFACTS               when set, down exports the lane's logs there first (CI)

_sriov_lane_args() {
	local -n _args=$1
	_args=()
	if [[ -n "${SRIOV_LANE_CONFIG:-}" ]]; then
		_args+=(--config "${SRIOV_LANE_CONFIG}")
	fi
}

function up() {
	local bin="${SRIOV_LANE:-sriov-lane}"
	local nodes="${KUBEVIRT_NUM_NODES:-3}"
	if ! [[ "${nodes}" =~ ^[0-9]+$ ]] || ((nodes < 2)); then
		echo "KUBEVIRT_NUM_NODES must be a number >= 2 (1 server + at least 1 SR-IOV agent), got '${nodes}'" >&2
		return 2
	fi
	local provider="${KUBEVIRT_PROVIDER:-k3d-sriov}"
	local out="${KUBEVIRTCI_CONFIG_PATH:-_ci-configs}/${provider}"
	local args
	_sriov_lane_args args
	"${bin}" up "${args[@]}" --agents "$((nodes - 1))" --kubevirtci "${out}"
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
