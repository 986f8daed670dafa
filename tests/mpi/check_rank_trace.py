"""A trace of a pipeline on ranks: a process per rank holding every micro-batch's ops of its stage
as they ran, no two spans overlapping on one stream's track, and each run's span covering its ops.
   check_rank_trace.py TRACE.json RANKS MICRO_BATCHES"""
import json
import sys
from collections import defaultdict

trace, ranks, micros = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
events = json.load(open(trace))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
failed = []
rank_pids = [pid for pid, n in names.items() if " · rank " in n]
if len(rank_pids) < ranks:
    failed.append(f"{len(rank_pids)} rank processes, expected at least {ranks}")
for pid in rank_pids:
    ops = [e for e in events if e["pid"] == pid and e["ph"] == "X" and e["cat"] == "rank"]
    step = [e for e in events if e["pid"] == pid and e["ph"] == "X" and e["cat"] == "step"]
    seen = {e["args"]["micro_batch"] for e in ops if "micro_batch" in e["args"]}
    if seen != set(range(micros)):
        failed.append(f"{names[pid]}: micro-batches {sorted(seen)}, expected 0..{micros - 1}")
    tracks = defaultdict(list)
    for e in ops:
        tracks[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for tid, spans in tracks.items():
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            if b[0] < a[1] - 1e-3:
                failed.append(f"{names[pid]}: spans overlap on track {tid} at {b[0]} us")
                break
    end = max(e["ts"] + e["dur"] for e in ops) if ops else 0
    if not step or abs(step[0]["dur"] - end) > 1e-3:
        failed.append(f"{names[pid]}: the run's span does not end at its last op")
for f in failed:
    print("FAIL:", f)
if not failed:
    print(f"rank trace: {len(rank_pids)} rank processes, every micro-batch, no overlaps")
sys.exit(1 if failed else 0)
