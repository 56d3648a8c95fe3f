#!/usr/bin/env bash
# make bench: benchmarks on the rig, each against the shell-provider
# sequence it replaces, printed as medians and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
[[ $(id -u) -eq 0 ]] || { echo "bench: needs root (netlink moves, Docker)" >&2; exit 1; }
echo "== PF move: 2 stand-in PFs into 2 running containers and back (Go vs kubevirtci shell sequence)"
go run ./hack/bench/pfmove "$@"
