#!/usr/bin/env bash
# bench/switches.sh - the effect of each CCCL technique, measured in one run.
#
# Runs coll_perf under the shim for one collective and rank count with the
# policy switches of conf/cxlshim.conf flipped one at a time, with and
# without the per-device bandwidth model (cccl.model_devices: on a /dev/shm
# pool the devices are not real, so interleaving only shows with the model),
# and prints in-place busbw per size and configuration.
#
# usage: bench/switches.sh [-C all_gather|broadcast] [-N ranks] [-b min] [-e max]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
COLL=all_gather NRANKS=4 MIN=4M MAX=64M
while getopts "C:N:b:e:" o; do
	case $o in
	C) COLL=$OPTARG ;; N) NRANKS=$OPTARG ;; b) MIN=$OPTARG ;; e) MAX=$OPTARG ;;
	*) sed -n '2,11p' "$0"; exit 2 ;;
	esac
done
[ -e /dev/nvidia0 ] || export LD_LIBRARY_PATH=$PWD/$BUILD/emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
MODEL="CXLSHIM_CCCL_MODEL_DEVICES=1 CXLSHIM_CCCL_DEVICE_BW=2G"
CONFIGS=(
	"all:"
	"overlap=0:CXLSHIM_CCCL_OVERLAP=0"
	"interleave=0:CXLSHIM_CCCL_INTERLEAVE=0"
	"aggregate:CXLSHIM_CCCL_VARIANT=aggregate"
	"naive:CXLSHIM_CCCL_VARIANT=naive"
	"all+model:$MODEL"
	"interleave=0+model:$MODEL CXLSHIM_CCCL_INTERLEAVE=0"
	"naive+model:$MODEL CXLSHIM_CCCL_VARIANT=naive"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in "${!CONFIGS[@]}"; do
	name=${CONFIGS[$i]%%:*} vars=${CONFIGS[$i]#*:}
	# shellcheck disable=SC2086
	env $vars LD_PRELOAD="$PWD/$BUILD/libcxlshim.so" "$BUILD/bench/coll_perf" -C "$COLL" \
		-N "$NRANKS" -b "$MIN" -e "$MAX" -f 4 -n 10 -w 2 >"$tmp/$i.txt" 2>&1 ||
		{ echo "$name: coll_perf failed"; cat "$tmp/$i.txt"; exit 1; }
done
echo "# $COLL, $NRANKS ranks: in-place busbw (GB/s) per policy; model = 2 GB/s per device"
printf '%-24s' "config"
awk '/^ +[0-9]/ {printf "%12s", $1}' "$tmp/0.txt"
echo
for i in "${!CONFIGS[@]}"; do
	printf '%-24s' "${CONFIGS[$i]%%:*}"
	awk '/^ +[0-9]/ {printf "%12s", $12}' "$tmp/$i.txt"
	echo
done
