#!/usr/bin/env bash
# bench/plot.sh - render benchmark results as PNG charts with gnuplot.
#
# usage: bench/plot.sh RESULT_DIR...
#   RESULT_DIR  a folder written by bench/baselines.sh or bench/ab.sh
#               ($BUILD/bench/results/STAMP-TAG): every *.txt in it holding an
#               nccl-tests style table becomes one line of DIR/busbw.png,
#               bus bandwidth versus message size (out of place; the shim's
#               in-place column too), so the shim and its baselines measured
#               in the same run sit on one chart.
#               A latency.csv in it ("name,p50_us,p90_us,p99_us,p999_us",
#               one row per configuration, as the socket benchmarks write)
#               becomes DIR/latency.png, percentiles per configuration.
# `make plots` runs it on every folder under $BUILD/bench/results.
set -euo pipefail

if ! command -v gnuplot >/dev/null; then
	echo "plot: gnuplot not installed (make deps installs gnuplot-nox)" >&2
	exit 77
fi

# size and busbw columns (out-of-place 8, in-place 12) of a table
columns() {
	awk -v col="$2" '!/^#/ && NF >= 12 && $1 ~ /^[0-9]+$/ { print $1, $col }' "$1"
}

busbw_chart() {
	local dir=$1 coll ranks plots=() f name first
	first=$(grep -l "nccl-tests style benchmark" "$dir"/*.txt 2>/dev/null | head -1)
	[ -n "$first" ] || return 0
	coll=$(sed -n '1s/.*: [a-z_]*perf \([a-z_]*\).*/\1/p' "$first")
	ranks=$(sed -n '2s/.*nranks \([0-9]*\).*/\1/p' "$first")
	for f in "$dir"/*.txt; do
		grep -q "nccl-tests style benchmark" "$f" || continue
		name=$(basename "$f" .txt)
		columns "$f" 8 >"$dir/.$name.oop"
		[ -s "$dir/.$name.oop" ] || continue
		plots+=("'$dir/.$name.oop' using 1:2 with linespoints title '$name'")
		if [ "$name" = shim ]; then
			columns "$f" 12 >"$dir/.$name.ip"
			plots+=("'$dir/.$name.ip' using 1:2 with linespoints dashtype 2 title 'shim (in place)'")
		fi
	done
	[ ${#plots[@]} -gt 0 ] || return 0
	gnuplot <<-GP
		set terminal png size 900,560 noenhanced
		set output '$dir/busbw.png'
		set title '${coll:-collective}, ${ranks:-?} ranks: bus bandwidth versus size'
		set logscale x 2
		set format x '%.0b %BB'
		set xlabel 'message size'
		set ylabel 'busbw (GB/s)'
		set yrange [0:*]
		set key top left
		set grid
		plot $(IFS=,; echo "${plots[*]}")
	GP
	rm -f "$dir"/.*.oop "$dir"/.*.ip
	echo "$dir/busbw.png"
}

latency_chart() {
	local dir=$1
	[ -s "$dir/latency.csv" ] || return 0
	gnuplot <<-GP
		set terminal png size 900,560 noenhanced
		set output '$dir/latency.png'
		set title 'latency percentiles'
		set datafile separator ','
		set style data histograms
		set style histogram clustered gap 1
		set style fill solid 0.8
		set ylabel 'microseconds'
		set logscale y
		set key top left
		set grid y
		plot '$dir/latency.csv' using 2:xtic(1) title 'p50', '' using 3 title 'p90', \
		     '' using 4 title 'p99', '' using 5 title 'p99.9'
	GP
	echo "$dir/latency.png"
}

[ $# -gt 0 ] || { sed -n '2,16p' "$0"; exit 2; }
for d in "$@"; do
	busbw_chart "$d"
	latency_chart "$d"
done
