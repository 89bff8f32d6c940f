#!/usr/bin/env bash
# trace.sh - a 3-rank job traced at level "stages" through `cxlshim run
# -t`; `cxlshim trace` must turn the files into a timeline that passes the
# Chrome trace-event schema (checked field by field with python3's json)
# and a summary that counts every collective, all complete.
set -euo pipefail
B=${BUILD:-build}
CX=$B/cxlshim
ITERS=5
dir=$(mktemp -d /tmp/cxlshim-ops-trace.XXXXXX)
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-trace-$$.pool
trap 'rm -rf "$dir" "$CXLSHIM_POOL_PATH"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 not installed (make deps installs it)"
	exit 77
fi
$CX run -e -s -t "$dir/traces" -- "$B/tests/ops_job" traffic 3 $ITERS
[ "$(ls "$dir"/traces/*.trace | wc -l)" = 3 ] || fail "one trace per rank written at exit"
$CX trace -o "$dir/timeline.json" "$dir"/traces/*.trace | tee "$dir/summary"
for c in AllGather Broadcast AllReduce; do
	grep -Eq "^$c +$((3 * ITERS)) .* 0$" "$dir/summary" || fail "$c: $((3 * ITERS)) calls, none incomplete"
done
python3 - "$dir/timeline.json" $((3 * ITERS)) <<'PY'
import json, sys

# Trace Event Format (the Chrome/Perfetto JSON importer): an object with
# a traceEvents array; every event has name, ph, pid, tid, ts; complete
# events ("X") a non-negative dur; metadata ("M") args.name.
doc = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list), "traceEvents array"
assert doc.get("displayTimeUnit") in (None, "ms", "ns")
ops = {}
spans = {}
for e in doc["traceEvents"]:
    for f, t in (("name", str), ("ph", str), ("pid", int), ("tid", int)):
        assert isinstance(e.get(f), t), f"{f} missing or not {t.__name__}: {e}"
    assert isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, f"ts: {e}"
    assert e["ph"] in ("X", "M", "B", "E", "i", "C"), f"phase {e['ph']}"
    if e["ph"] == "M":
        assert e["name"] in ("process_name", "thread_name") and isinstance(e["args"]["name"], str)
        continue
    assert isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, f"dur: {e}"
    a = e["args"]
    assert not a.get("incomplete"), f"incomplete op: {e}"
    key = (e["pid"], a["comm"], a["seq"])
    spans.setdefault(key, {})[e["name"].split(" ")[0]] = (e["ts"], e["ts"] + e["dur"])
    if e["name"].split(" ")[0] in ("AllGather", "Broadcast", "AllReduce") and e["tid"] % 8 == 2:
        ops[e["name"].split(" ")[0]] = ops.get(e["name"].split(" ")[0], 0) + 1
for c in ("AllGather", "Broadcast", "AllReduce"):
    assert ops.get(c) == want, f"{c}: {ops.get(c)} op spans, want {want}"
# stages sit inside their op: the streams publish and fetch between the
# op's start and its completion
eps = 0.002
for key, s in spans.items():
    op = [v for k, v in s.items() if k not in ("publish", "fetch")]
    start = min(v[0] for v in op)
    end = max(v[1] for v in op)
    for st in ("publish", "fetch"):
        assert st in s, f"{key}: no {st} stage"
        assert s[st][0] >= start - eps and s[st][1] <= end + eps, f"{key}: {st} outside its op"
print(f"timeline ok: {len(doc['traceEvents'])} events, {sum(ops.values())} ops")
PY
echo "trace: ok"
