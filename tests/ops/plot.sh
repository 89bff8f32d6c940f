#!/usr/bin/env bash
# plot.sh - bench/plot.sh turns a results folder (tables measured by
# bench/baselines.sh, kept in tests/ops/plot-fixture, and a socket latency
# CSV) into PNG charts.
set -euo pipefail
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed (make deps)"; exit 77; }
dir=$(mktemp -d /tmp/cxlshim-ops-plot.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp tests/ops/plot-fixture/* "$dir/"
bench/plot.sh "$dir"
for f in busbw latency; do
	[ "$(head -c 4 "$dir/$f.png" | od -An -tx1 | tr -d ' ')" = 89504e47 ] || {
		echo "FAIL: $f.png is not a PNG"; exit 1; }
done
echo "plot: ok"
