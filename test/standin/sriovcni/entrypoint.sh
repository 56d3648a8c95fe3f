#!/bin/sh
# Entrypoint of the sriov-cni stand-in image: the contract of the upstream
# image's /entrypoint.sh (k8snetworkplumbingwg/sriov-cni
# images/entrypoint.sh@v2.10.0), which the product's DaemonSet runs with no
# arguments: copy /usr/bin/sriov into /host/opt/cni/bin and sleep until
# stopped. Parameters, as there: --cni-bin-dir=DIR, --sriov-bin-file=FILE,
# --no-sleep, -h/--help; anything else exits 1.
set -e

CNI_BIN_DIR="/host/opt/cni/bin"
SRIOV_BIN_FILE="/usr/bin/sriov"
NO_SLEEP=0

usage() {
	printf 'Entrypoint of the sriov-cni stand-in: copies the sriov binary into the CNI bin dir.\n\n'
	printf './entrypoint.sh\n\t-h --help\n\t--cni-bin-dir=%s\n\t--sriov-bin-file=%s\n\t--no-sleep\n' "$CNI_BIN_DIR" "$SRIOV_BIN_FILE"
}

while [ "$1" != "" ]; do
	# PARAM is what precedes the first '=', VALUE the field after it.
	PARAM=$(echo "$1" | awk -F= '{print $1}')
	VALUE=$(echo "$1" | awk -F= '{print $2}')
	case $PARAM in
	-h | --help)
		usage
		exit
		;;
	--cni-bin-dir) CNI_BIN_DIR=$VALUE ;;
	--sriov-bin-file) SRIOV_BIN_FILE=$VALUE ;;
	--no-sleep) NO_SLEEP=1 ;;
	*)
		echo "ERROR: unknown parameter \"$PARAM\""
		usage
		exit 1
		;;
	esac
	shift
done

for p in "$CNI_BIN_DIR" "$SRIOV_BIN_FILE"; do
	if [ ! -e "$p" ]; then
		echo "Location $p does not exist"
		exit 1
	fi
done

cp -f "$SRIOV_BIN_FILE" "$CNI_BIN_DIR"

if [ "$NO_SLEEP" -eq 1 ]; then
	exit 0
fi

echo "Entering sleep... (success)"
trap : TERM INT
sleep 2147483647 &
wait
