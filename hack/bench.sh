#!/usr/bin/env bash
# make bench: benchmarks on the rig, each against the shell-provider
# sequence it replaces, printed as medians and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
[[ $(id -u) -eq 0 ]] || { echo "bench: needs root (netlink moves, Docker)" >&2; exit 1; }
echo "== PF move: 2 stand-in PFs into 2 running containers and back (Go vs kubevirtci shell sequence)"
go run ./hack/bench/pfmove "$@"
echo "== lane: sriov-lane up/reset/down on the rig next to k3d's ClusterRun alone (same cluster shape, same run)"
# Built, not `go run`: SIGINT/SIGTERM reach the bench itself, which undoes
# its lane, cluster and rig before exiting. LANE_BENCH_ARGS e.g. "-n 9 -v".
go build -o bin/bench-lane ./hack/bench/lane
# shellcheck disable=SC2086
bin/bench-lane ${LANE_BENCH_ARGS:-}
