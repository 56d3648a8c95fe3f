#!/usr/bin/env bash
# The kubevirtci-style shell sequence the Go PF move is measured against
# (field notes section 6): for each PF/container pair, docker inspect for
# the PID, a /var/run/netns symlink, `ip link set netns`, set up; then give
# every PF back with `netns 1`. Usage: shell-pf-move.sh PF CONTAINER [PF CONTAINER]...
set -euo pipefail
pairs=("$@")
mkdir -p /var/run/netns
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
	pf="${pairs[i]}" c="${pairs[i+1]}"
	pid="$(docker inspect -f '{{.State.Pid}}' "$c")"
	ln -sf "/proc/$pid/ns/net" "/var/run/netns/$c"
	ip link set "$pf" netns "$c"
	ip -n "$c" link set "$pf" up
done
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
	pf="${pairs[i]}" c="${pairs[i+1]}"
	ip -n "$c" link set "$pf" netns 1
	rm -f "/var/run/netns/$c"
done
