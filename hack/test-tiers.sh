#!/usr/bin/env bash
# make test's tiers, one after another, each alone on the machine with the
# parallelism its cores hold and a timeout of its own (docs/testing.md).
# A failing tier does not stop the later ones, so one run shows
# every failure; the run ends with a table of the tiers and the failed tests.
#
#   hack/test-tiers.sh [TIER ...]    every tier when none is named
#
# Tiers, in the order they run:
#   unit        neither root, Docker, a control plane nor a guest
#   apiserver   tests that start a real etcd and kube-apiserver
#   cluster     root or Docker: the rig (links, netns, FUSE), k3d clusters,
#               the e2e lanes
#   kernel      the QEMU guests of test/kernel
#   disruptive  what disturbs everything else: the dockerd restart and the
#               random kills, last
#
# Reports go to REPORT_DIR, one of each per tier (and per stand-in module):
# junit_<report>.xml, coverage_<report>.out and .html, timing_<report>.json;
# and a stand-in module's go test output, output_<report>.txt (it runs
# beside the tier's and is printed after it).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}" || exit 1
GO=${GO:-go}
TESTFLAGS=${TESTFLAGS:-}
REPORT_DIR=${REPORT_DIR:-${ROOT}/bin/reports}
GOTESTSUM=${ROOT}/bin/gotestsum
CORES=$(nproc)

# The random choices of a run (the kill points of test/e2e) follow one seed,
# printed here; SRIOV_LANE_TEST_SEED=N make test runs them again.
export SRIOV_LANE_TEST_SEED=${SRIOV_LANE_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
# Every bound a test waits on is multiplied by one factor (test/bound):
# an idle machine of 4 cores or more is 1; fewer cores scale it up, and so
# does what else keeps the CPUs busy as the run starts (another job, a CPU
# hog), in proportion to the cores it takes, measured over a second of
# /proc/stat (the load average would count this run's own verify). Set it
# to override.
cpu_busy() { # cores kept busy over the last second, by /proc/stat
	local a b
	read -r -a a </proc/stat
	sleep 1
	read -r -a b </proc/stat
	awk -v c="${CORES}" -v u="$((b[1] + b[2] + b[3] + b[6] + b[7] + b[8] - a[1] - a[2] - a[3] - a[6] - a[7] - a[8]))" \
		-v t="$((b[1] + b[2] + b[3] + b[4] + b[5] + b[6] + b[7] + b[8] - a[1] - a[2] - a[3] - a[4] - a[5] - a[6] - a[7] - a[8]))" \
		'BEGIN { printf "%.1f", (t > 0 ? u / t : 0) * c }'
}
if [[ -z ${SRIOV_LANE_TEST_SCALE:-} ]]; then
	BUSY=$(cpu_busy)
	SRIOV_LANE_TEST_SCALE=$(awk -v c="${CORES}" -v b="${BUSY}" 'BEGIN { printf "%.1f", (c < 4 ? 4 / c : 1) * (1 + b / c) }')
fi
export SRIOV_LANE_TEST_SCALE
# Make any prerequisite a test would skip for a failure: nothing silently
# goes untested.
export SRIOV_LANE_TEST_STRICT=1

# The tests the disruptive tier runs and the cluster tier skips: the dockerd
# restart stops every container on the host, and the random kills leave a
# lane in any state for down to finish.
DISRUPTIVE_TESTS='^(TestDockerdRestartedLanesRepaired|TestSIGKILLAtRandomPointsLosesNothing)$'

APISERVER_PKGS=(./pkg/cni ./pkg/reset ./test/apiserver ./test/standin/k3s)
# Named longest first, so go test starts them first and the short ones fill
# the gaps: the e2e lanes, the rig's own k3d cluster, pkg/provider's
# clusters in series.
CLUSTER_PKGS=(./test/e2e ./test/standin/k3drig ./pkg/provider ./pkg/sriov ./pkg/lane ./pkg/fleet ./test/testutil
	./test/standin/cnimulti ./test/rig ./test/rig/nsutil ./test/rig/sysfs ./test/standin/rigsysfs ./test/standin/vfiodev)
KERNEL_PKGS=(./test/kernel)
# Stand-ins with their own Go module (kept out of the product's dependency
# graph), by tier: sriovdp serves a FUSE sysfs and sriovcni moves links
# between netns, both as root.
UNIT_MODULES=(test/standin/flannelcni test/standin/localpath test/standin/drasriov)
CLUSTER_MODULES=(test/standin/sriovdp test/standin/sriovcni)

# unit_pkgs prints every package of the module that no other tier names.
unit_pkgs() {
	local others=" ${APISERVER_PKGS[*]} ${CLUSTER_PKGS[*]} ${KERNEL_PKGS[*]} " p
	"${GO}" list -f '{{.Dir}}' ./... | while read -r p; do
		p="./${p#"${ROOT}"/}"
		[[ "${others}" == *" ${p} "* ]] || echo "${p}"
	done
}

declare -A T_TESTS T_FAILED T_SKIPPED T_WALL T_RC
TIERS_RUN=()

# gotest REPORT DIR TIMEOUT ARGS... runs go test under gotestsum in DIR (a
# module's root) with its reports named REPORT; returns go test's result.
gotest() {
	local report=$1 dir=$2 timeout=$3 rc=0
	shift 3
	(
		cd "${dir}" || exit 1
		# shellcheck disable=SC2086 # TESTFLAGS is a list of flags
		"${GOTESTSUM}" --format "$(case " ${TESTFLAGS} " in *" -v "* | *" -v=true "*) echo standard-verbose ;; *) echo standard-quiet ;; esac)" \
			--junitfile "${REPORT_DIR}/junit_${report}.xml" --jsonfile-timing-events "${REPORT_DIR}/timing_${report}.json" \
			--raw-command -- "${GO}" test -json -covermode=count -coverpkg=./... -coverprofile="${REPORT_DIR}/coverage_${report}.out" \
			-count=1 -timeout "${timeout}" ${TESTFLAGS} "$@"
	) || rc=1
	# go tool cover resolves a profile's packages in the module that made
	# it, so each module's HTML is rendered in its own directory.
	if [[ -s "${REPORT_DIR}/coverage_${report}.out" ]]; then
		(cd "${dir}" && "${GO}" tool cover -html="${REPORT_DIR}/coverage_${report}.out" -o "${REPORT_DIR}/coverage_${report}.html") || rc=1
	fi
	return "${rc}"
}

# ensure_docker starts dockerd and the rig registry again when a test left
# them down (the dockerd restart test, killed mid-restart).
ensure_docker() {
	docker info >/dev/null 2>&1 && docker inspect -f '{{.State.Running}}' sriov-lane-rig-registry 2>/dev/null | grep -qx true && return 0
	echo "test-tiers: dockerd or the rig registry is down: running hack/test-env.sh"
	hack/test-env.sh
}

# start_modules TIER MODULE... starts each stand-in module's go test in
# the background, to run beside the tier's go test of the product: they are
# mostly compiles and links, and so the unit tier takes 20 s warm where one
# after another took 30. Each one's output goes to output_<report>.txt in
# REPORT_DIR, for finish_modules.
MODULE_PIDS=()
MODULE_OUTS=()
start_modules() {
	local tier=$1 m
	shift
	for m in "$@"; do
		MODULE_OUTS+=("${REPORT_DIR}/output_${tier}-${m##*/}.txt")
		gotest "${tier}-${m##*/}" "${m}" 10m -p "${CORES}" ./... >"${MODULE_OUTS[-1]}" 2>&1 &
		MODULE_PIDS+=($!)
	done
}

# finish_modules waits for the modules start_modules started and prints
# each one's output whole; it fails if any of them did.
finish_modules() {
	local i rc=0
	for i in "${!MODULE_PIDS[@]}"; do
		wait "${MODULE_PIDS[i]}" || rc=1
		cat "${MODULE_OUTS[i]}"
	done
	MODULE_PIDS=()
	MODULE_OUTS=()
	return "${rc}"
}

run_tier() {
	local tier=$1 rc=0 start
	start=$(date +%s)
	echo "test-tiers: tier ${tier} ($(date -u +%H:%M:%S), ${CORES} cores)"
	case ${tier} in
	unit)
		mapfile -t pkgs < <(unit_pkgs)
		start_modules unit "${UNIT_MODULES[@]}"
		gotest unit . 10m -p "${CORES}" "${pkgs[@]}" || rc=1
		finish_modules || rc=1
		;;
	apiserver)
		# Two control planes a core: past its start, a test's kube-apiserver
		# and etcd mostly wait with it (its bounds, a webhook's timeout).
		gotest apiserver . 15m -p "${CORES}" -parallel $((2 * CORES)) "${APISERVER_PKGS[@]}" || rc=1
		;;
	cluster)
		ensure_docker || rc=1
		# Two e2e lanes a core: a lane's up waits on its nodes' pulls and
		# starts as much as it computes.
		start_modules cluster "${CLUSTER_MODULES[@]}"
		gotest cluster . 40m -p "${CORES}" -parallel $((2 * CORES)) -skip "${DISRUPTIVE_TESTS}" "${CLUSTER_PKGS[@]}" || rc=1
		finish_modules || rc=1
		;;
	kernel)
		# Four guests a core: each is one TCG vCPU, busy for its boot and
		# then mostly waiting on the kernel's and the product's timers (the
		# cores ~10% busy past the boots), and the hung guest of
		# TestBootFailures is halted for most of its bound.
		gotest kernel . 35m -p "${CORES}" -parallel $((4 * CORES)) "${KERNEL_PKGS[@]}" || rc=1
		;;
	disruptive)
		ensure_docker || rc=1
		SRIOV_LANE_TEST_DOCKERD_RESTART=1 gotest disruptive . 25m -parallel $((2 * CORES)) -run "${DISRUPTIVE_TESTS}" ./test/e2e || rc=1
		ensure_docker || rc=1
		;;
	*)
		echo "test-tiers: no tier ${tier} (unit, apiserver, cluster, kernel, disruptive)" >&2
		return 2
		;;
	esac
	T_WALL[${tier}]=$(($(date +%s) - start))
	T_RC[${tier}]=${rc}
	TIERS_RUN+=("${tier}")
}

# count TIER fills the tier's counts from its JUnit reports (gotestsum
# writes the totals on <testsuites>; a skipped test has a <skipped> child).
count() {
	local tier=$1 f tests=0 failed=0 skipped=0 a
	for f in "${REPORT_DIR}/junit_${tier}.xml" "${REPORT_DIR}/junit_${tier}"-*.xml; do
		[[ -f "${f}" ]] || continue
		a=$(grep -o '<testsuites [^>]*>' "${f}" | head -n 1)
		tests=$((tests + $(attr tests "${a}")))
		failed=$((failed + $(attr failures "${a}") + $(attr errors "${a}")))
		skipped=$((skipped + $(grep -c '<skipped' "${f}")))
	done
	T_TESTS[${tier}]=${tests}
	T_FAILED[${tier}]=${failed}
	T_SKIPPED[${tier}]=${skipped}
}

attr() { local v; v=$(grep -o " $1=\"[0-9]*\"" <<<"$2" | head -n 1 | tr -dc '0-9'); echo "${v:-0}"; }

# failed_tests TIER lists the tier's failed tests as package and name.
failed_tests() {
	local f
	for f in "${REPORT_DIR}/junit_$1.xml" "${REPORT_DIR}/junit_$1"-*.xml; do
		[[ -f "${f}" ]] || continue
		awk '/<testcase /{ c = $0; sub(/.*classname="/, "", c); sub(/".*/, "", c); n = $0; sub(/.* name="/, "", n); sub(/".*/, "", n) }
			/<failure|<error/{ print "  " c " " n }' "${f}"
	done | sort -u
}

# sweep removes what killed runs left under the names of free test slots
# (testutil.Sweep). It needs dockerd and bin/lane-rig, which test-env makes;
# the unit tier alone needs neither and leaves nothing to sweep.
SWEEP_RC=0
sweep() {
	if [[ ! -x bin/lane-rig ]] || ! docker info >/dev/null 2>&1; then
		echo "test-tiers: not sweeping $1: no bin/lane-rig or no dockerd (make test-env)"
		return 0
	fi
	echo "test-tiers: sweeping $1 (lane-rig sweep)"
	bin/lane-rig sweep || SWEEP_RC=1
}

mkdir -p "${REPORT_DIR}"
tiers=("$@")
((${#tiers[@]})) || tiers=(unit apiserver cluster kernel disruptive)
echo "test-tiers: seed ${SRIOV_LANE_TEST_SEED} (SRIOV_LANE_TEST_SEED=${SRIOV_LANE_TEST_SEED} make test runs the same kills)"
echo "test-tiers: bounds scaled by ${SRIOV_LANE_TEST_SCALE} (${CORES} cores, ${BUSY:-not measured} busy; SRIOV_LANE_TEST_SCALE sets it)"
sweep "what earlier runs left"
for tier in "${tiers[@]}"; do
	rm -f "${REPORT_DIR}/junit_${tier}.xml" "${REPORT_DIR}/junit_${tier}"-*.xml
	run_tier "${tier}" || exit $?
done
sweep "what this run left"

rc=${SWEEP_RC}
echo
printf '%-11s %6s %6s %6s %7s %8s  %s\n' tier tests passed failed skipped wall result
for tier in "${TIERS_RUN[@]}"; do
	count "${tier}"
	result=ok
	if ((T_RC[${tier}] != 0 || T_FAILED[${tier}] != 0)); then
		result=FAIL
		rc=1
	fi
	printf '%-11s %6d %6d %6d %7d %5dm%02ds  %s\n' "${tier}" "${T_TESTS[${tier}]}" \
		$((T_TESTS[${tier}] - T_FAILED[${tier}] - T_SKIPPED[${tier}])) "${T_FAILED[${tier}]}" "${T_SKIPPED[${tier}]}" \
		$((T_WALL[${tier}] / 60)) $((T_WALL[${tier}] % 60)) "${result}"
done
for tier in "${TIERS_RUN[@]}"; do
	[[ ${T_RC[${tier}]} -ne 0 || ${T_FAILED[${tier}]} -ne 0 ]] || continue
	echo "failed in ${tier}:"
	f=$(failed_tests "${tier}")
	[[ -n "${f}" ]] || f="  (no test failed: the tier's build, a package's TestMain or its timeout did; see its output above)"
	echo "${f}"
done
((SWEEP_RC == 0)) || echo "lane-rig sweep failed: see its errors above"
echo "test reports: ${REPORT_DIR}; seed ${SRIOV_LANE_TEST_SEED}"
exit "${rc}"
