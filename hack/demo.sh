#!/usr/bin/env bash
# make demo / make demo-down: a lane on a machine without SR-IOV NICs. The
# NICs are the test rig's stand-ins (veth links and a FUSE sysfs that plays
# the kernel's part) and the nodes run the stand-in k3s supervisor over real
# kubelet, containerd, kube-proxy, Flannel and Multus; sriov-lane itself is
# the same binary and code path as on real hardware.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${SRIOV_LANE_DEMO_DIR:-/var/tmp/sriov-lane-demo}"
PREFIX=demopf
LANE="${DIR}/lane.yaml"
KC="${DIR}/kubeconfig"
BIN="${ROOT}/bin"

say() { printf '\ndemo: %s\n' "$*"; }

case "${1:-}" in
up)
	say "stand-ins: 2 veth links as SR-IOV PFs and a fake sysfs in ${DIR} (no NIC of this host is touched)"
	"${BIN}/lane-rig" up --dir "${DIR}" --pfs 2 --prefix "${PREFIX}" \
		--image-mirror "$(cat "${ROOT}/bin/test-assets/rig-image-mirror")"
	say "sriov-lane up (the real thing; its nodes are the stand-in k3s image)"
	"${BIN}/sriov-lane" up --config "${LANE}" --kubeconfig "${KC}"
	say "sriov-lane status"
	"${BIN}/sriov-lane" status --config "${LANE}"
	say "sriov-lane verify"
	"${BIN}/sriov-lane" verify --config "${LANE}"
	cat <<MSG

demo: the lane is up and stays up. What is real and what stands in:
  real:       sriov-lane, Docker, k3d, netlink moves, kubelet, containerd, runc,
              kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy,
              Flannel, Multus (built from their upstream Go modules)
  stand-ins:  the SR-IOV PFs and VFs (veth links, a FUSE sysfs), the k3s
              supervisor in the node image, the SR-IOV device plugin, sriov-cni
              and flannel's CNI plugin (their modules are not served here)

Look around:
  export KUBECONFIG=${KC}
  kubectl get nodes,pods -A -o wide        # if kubectl is installed
  ${BIN}/sriov-lane status --config ${LANE}
  ${BIN}/sriov-lane verify --config ${LANE}
  docker ps --filter label=k3d.cluster=rig-${PREFIX}
Tear it down (every stand-in PF goes back, then the rig goes):
  make demo-down
MSG
	;;
down)
	if [[ -f "${LANE}" ]]; then
		"${BIN}/sriov-lane" down --config "${LANE}"
	fi
	"${BIN}/lane-rig" down --dir "${DIR}"
	rm -rf "${DIR}"
	say "demo lane and rig removed"
	;;
*)
	echo "usage: $0 up|down" >&2
	exit 2
	;;
esac
