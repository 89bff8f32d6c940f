#!/usr/bin/env bash
# tests/fuzz/run.sh TARGET SECONDS - run one libFuzzer target for SECONDS
# from its seed corpus (tests/fuzz/corpus/TARGET).  New inputs go to a
# scratch corpus, crashes to $BUILD_FUZZ/artifacts (and fail the run).
set -uo pipefail
cd "$(dirname "$0")/../.."
T=$1 S=${2:-10}
BIN=${BUILD_FUZZ:-build-fuzz}/fuzz_$T
if [ ! -x "$BIN" ]; then
	echo "SKIP: $BIN not built (needs clang and its libFuzzer runtime: make deps)"
	exit 77
fi
work=$(mktemp -d /tmp/cxlshim-fuzz-$T.XXXXXX)
art=${BUILD_FUZZ:-build-fuzz}/artifacts/$T
mkdir -p "$art"
trap 'rm -rf "$work"' EXIT
"$BIN" -max_total_time="$S" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$art/" "$work" "tests/fuzz/corpus/$T" 2>&1 | tail -n 25
rc=${PIPESTATUS[0]}
ls "$art" | head
exit $rc
