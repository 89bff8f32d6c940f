#!/usr/bin/env bash
# trace.sh - a 3-rank job traced at level "stages" through `cxlshim run
# -t`; `cxlshim trace` must turn the files into a timeline that passes the
# Chrome trace-event schema (checked field by field with python3's json)
# and a summary that counts every collective, all complete.  Then a
# benchmark (coll_perf) traced the same way: both timelines must validate
# against the Trace Event Format's JSON schema (trace_event.schema.json,
# with python3-jsonschema), which must itself refuse damaged timelines.
set -euo pipefail
B=${BUILD:-build}
CX=$B/cxlshim
ITERS=5
dir=$(mktemp -d /tmp/cxlshim-ops-trace.XXXXXX)
export CXLSHIM_POOL_PATH=/dev/shm/cxlshim-ops-trace-$$.pool
trap 'rm -rf "$dir" "$CXLSHIM_POOL_PATH"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

if ! command -v python3 >/dev/null || ! python3 -c "import jsonschema" 2>/dev/null; then
	echo "SKIP: python3 or python3-jsonschema not installed (make deps installs them)"
	exit 77
fi
[ -x "$B/bench/coll_perf" ] || fail "$B/bench/coll_perf not built (make test-build)"
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

echo "== a benchmark's timeline against the JSON schema"
$CX run -e -s -t "$dir/bench" -- "$B/bench/coll_perf" -C all_reduce -N 2 -b 4K -e 256K -f 4 \
	-n 5 -w 1 | tail -n 6
$CX trace -o "$dir/bench.json" "$dir"/bench/*.trace | tee "$dir/bench.summary"
grep -Eq "^AllReduce +[0-9]+ .* 0$" "$dir/bench.summary" || fail "the benchmark's AllReduces"
python3 - tests/ops/trace_event.schema.json "$dir/timeline.json" "$dir/bench.json" <<'PY'
import copy, json, sys
import jsonschema

schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
for path in sys.argv[2:]:
    doc = json.load(open(path))
    errs = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
    for e in errs[:5]:
        print(f"{path}: {list(e.path)}: {e.message}")
    assert not errs, f"{path}: {len(errs)} schema errors"
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert ops, f"{path}: no complete events"
    # the schema is not vacuous: each damage below must be refused
    for what, hurt in (("an event without ts", lambda d: d["traceEvents"][-1].pop("ts")),
                       ("a negative dur", lambda d: d["traceEvents"][-1].__setitem__("dur", -1)),
                       ("an unknown phase", lambda d: d["traceEvents"][-1].__setitem__("ph", "Z")),
                       ("a string pid", lambda d: d["traceEvents"][-1].__setitem__("pid", "1")),
                       ("an unknown field", lambda d: d["traceEvents"][-1].__setitem__("tsx", 1)),
                       ("no traceEvents", lambda d: d.pop("traceEvents"))):
        bad = copy.deepcopy(doc)
        hurt(bad)
        assert not v.is_valid(bad), f"the schema accepts {what}"
    print(f"{path}: valid, {len(doc['traceEvents'])} events ({len(ops)} spans)")
PY
echo "trace: ok"
