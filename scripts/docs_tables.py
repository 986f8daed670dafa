#!/usr/bin/env python3
"""Rewrites the generated regions of README.md and docs/*.md from the result files in docs/results/.

A region is two HTML comments around the text this script owns:

    <!-- generated: VIEW FILE [FILE...] -->
    ...
    <!-- /generated -->

FILE is a path under docs/results/ (`h100/validate.json`); VIEW says what to draw from it:

    text         the file verbatim, in a fenced block (a saved `perfsim run` report);
                 `blocks=N` after FILE keeps its first N blank-line-separated sections
    overall      a `perfsim validate` report's overall figures; several FILEs: one column each
    steps        step time and peak memory per scenario and step
    speedups     the speedup of each optimization over the step before it
    classes      per-op error by op class, with the worst op
    op_times     per-op error by measured op time
    collectives  collective timings per collective and GPU count (FILEs side by side)

Every table is preceded by a line naming its source: device, backend, profile, and the run
date and commit recorded for the file in docs/results/manifest.json.

    python3 scripts/docs_tables.py           rewrite the regions in place
    python3 scripts/docs_tables.py --check   exit 1, naming each stale region, if a rewrite
                                             would change anything (the docs_commands test)

Statistics are computed as `perfsim validate` computes them (docs/VALIDATION.md, Statistics).
Python 3 standard library only.
"""

import argparse
import json
import math
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
REGION = re.compile(r"(<!-- generated: (?P<spec>[^>]*?) -->\n)(?P<body>.*?)(<!-- /generated -->)", re.S)
MINUS = "\u2212"


# ---- numbers, written as perfsim's reports write them ------------------------------------------

def pct(x, signed=False):
    if x is None:
        return "—"
    s = f"{abs(x) * 100:.1f}%"
    if not signed or s == "0.0%":
        return s
    return ("+" if x > 0 else MINUS) + s


def sig3(v):
    return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"


def seconds(s):
    if s is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{sig3(s / scale)} {unit}"
    return f"{sig3(s / 1e-9)} ns"


def gib(b):
    if b is None:
        return "—"
    return f"{sig3(b / 2**30)} GiB"


def size(b):
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:g} {unit}"
    return f"{b:g} B"


def stats(values):
    """count, median, p90 (nearest rank), max of the magnitudes."""
    v = sorted(abs(x) for x in values)
    n = len(v)
    if n == 0:
        return {"count": 0, "median": None, "p90": None, "max": None}
    median = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return {"count": n, "median": median, "p90": v[math.ceil(0.9 * n) - 1], "max": v[-1]}


def table(header, rows, align):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


# ---- sources -----------------------------------------------------------------------------------

def load(name):
    path = RESULTS / name
    if name.endswith(".json"):
        return json.loads(path.read_text())
    return path.read_text()


def manifest():
    return json.loads((RESULTS / "manifest.json").read_text())


def source_line(name, report):
    m = manifest().get(name, {})
    v = report["validate"]
    p = v["profile"]
    parts = [f"`docs/results/{name}`: {v['device']}, {v['backend']} backend"]
    parts.append(f"profile {p['name']} ({p['status']})" if p.get("calibrated") else f"profile {p['name']} (datasheet, uncalibrated)")
    if m.get("measured"):
        parts.append(f"measured {m['measured']}")
    if m.get("commit"):
        parts.append(f"written at commit {m['commit']}")
    return "Source: " + "; ".join(parts) + ".\n\n"


def label(name):
    return manifest().get(name, {}).get("label", name)


# ---- views ---------------------------------------------------------------------------------------

def view_text(names):
    opts = dict(n.split("=", 1) for n in names if "=" in n)
    names = [n for n in names if "=" not in n]
    body = "".join(load(n) for n in names)
    m = manifest().get(names[0], {})
    note = f"Source: `docs/results/{names[0]}`"
    if m.get("command"):
        note += f", written by `{m['command']}`"
    if "blocks" in opts:  # the first N blank-line-separated blocks only
        kept = body.strip("\n").split("\n\n")[: int(opts["blocks"])]
        body = "\n\n".join(kept) + "\n"
        note += f" (its first {opts['blocks']} sections)"
    return note + ".\n\n```\n" + body + ("" if body.endswith("\n") else "\n") + "```\n"


FIGURES = [("per_op_time", "per-op time"), ("step_time", "step time (end to end)"),
           ("speedup", "speedup per optimization"), ("peak_memory", "peak memory"),
           ("collective_time", "collective time")]


def view_overall(names):
    reports = [load(n) for n in names]
    out = "".join(source_line(n, r) for n, r in zip(names, reports))
    if len(reports) == 1:
        rows = []
        for key, what in FIGURES:
            s = reports[0]["overall"].get(key)
            if s and s["count"]:
                rows.append([what, str(s["count"]), pct(s["median"]), pct(s["p90"]), pct(s["max"])])
        return out + table(["figure", "count", "median", "p90", "max"], rows, "lrrrr")
    rows = []
    for key, what in FIGURES:
        cells = []
        for r in reports:
            s = r["overall"].get(key)
            cells.append(f"{pct(s['median'])} / {pct(s['p90'])} / {pct(s['max'])} ({s['count']})"
                         if s and s["count"] else "—")
        if any(c != "—" for c in cells):
            rows.append([what] + cells)
    header = ["figure: median / p90 / max (count)"] + [label(n) for n in names]
    return out + table(header, rows, "l" * (len(names) + 1))


def view_steps(names):
    r = load(names[0])
    rows = []
    for s in r["steps"]:
        if s.get("not_executed"):
            rows.append([s["scenario"], s["step"], seconds(s["predicted_s"]), "—", "—", gib(s["predicted_peak_bytes"]), "—", "—"])
            continue
        rows.append([s["scenario"], s["step"], seconds(s["predicted_s"]), seconds(s["measured_s"]), pct(s["time_error"], True),
                     gib(s["predicted_peak_bytes"]), gib(s["measured_peak_bytes"]), pct(s["memory_error"], True)])
    return source_line(names[0], r) + table(
        ["scenario", "step", "pred time", "meas time", "time err", "pred peak", "meas peak", "mem err"], rows, "llrrrrrr")


def view_speedups(names):
    r = load(names[0])
    rows = [[s["scenario"], s["step"], s["over"], f"{s['predicted']:.2f}×", f"{s['measured']:.2f}×", pct(s["error"], True)]
            for s in r["speedups"]]
    return source_line(names[0], r) + table(["scenario", "step", "over", "pred", "meas", "err"], rows, "lllrrr")


def worst(w):
    return f"{w['scenario']}/{w['step']}/{w['op']} {pct(w['error'], True)}" if w else "—"


def view_classes(names):
    r = load(names[0])
    rows = [[c["class"], str(c["stats"]["count"]), pct(c["stats"]["median"]), pct(c["stats"]["p90"]), pct(c["stats"]["max"]),
             worst(c.get("worst"))] for c in r["classes"]]
    return source_line(names[0], r) + table(["op class", "ops", "median", "p90", "max", "worst op"], rows, "lrrrrl")


def view_op_times(names):
    r = load(names[0])
    rows = [[b["op_time"], str(b["stats"]["count"]), pct(b["stats"]["median"]), pct(b["stats"]["p90"]), pct(b["stats"]["max"]),
             worst(b.get("worst"))] for b in r.get("op_times", [])]
    return source_line(names[0], r) + table(["measured op time", "ops", "median", "p90", "max", "worst op"], rows, "lrrrrl")


def view_collectives(names):
    reports = [load(n) for n in names]
    out = "".join(source_line(n, r) for n, r in zip(names, reports))
    groups = {}
    for n, r in zip(names, reports):
        for p in r["collectives"]["points"]:
            groups.setdefault((p["collective"], p["gpus"]), {}).setdefault(n, []).append(p["error"])
        for gpus in sorted({p["gpus"] for p in r["collectives"]["points"]}):
            groups.setdefault(("all", gpus), {})[n] = [p["error"] for p in r["collectives"]["points"] if p["gpus"] == gpus]
    order = ["all", "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"]
    rows = []
    for (coll, gpus) in sorted(groups, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1])):
        cells = []
        for n in names:
            e = groups[(coll, gpus)].get(n)
            if e:
                s = stats(e)
                cells.append(f"{pct(s['median'])} / {pct(s['p90'])} / {pct(s['max'])} ({s['count']})")
            else:
                cells.append("—")
        rows.append(["every collective" if coll == "all" else coll, str(gpus)] + cells)
    header = ["collective", "GPUs"] + [f"{label(n)}: median / p90 / max (timings)" for n in names]
    return out + table(header, rows, "lr" + "l" * len(names))


def view_published(names):
    r = load(names[0])
    m = manifest().get(names[0], {})
    out = f"Source: `docs/results/{names[0]}`"
    if m.get("command"):
        out += f", written by `{m['command']}`"
    if m.get("commit"):
        out += f" at commit {m['commit']}"
    out += ".\n\n"
    rows = [[s["source"], str(s["cases"]), pct(s["mean_abs_error"]), pct(s["max_abs_error"]), s["worst"], s["citation"]]
            for s in r["sources"]]
    rows.append(["all", str(len(r["cases"])), pct(r["mean_abs_error"]), pct(r["max_abs_error"]), "", ""])
    out += table(["source", "cases", "mean abs error", "max abs error", "worst case", "citation"], rows, "lrrrll")
    out += "\n"
    rows = [[c["scenario"], c["hardware"], c["metric"], sig3(c["published"]), sig3(c["predicted"]), pct(c["error"], True)]
            for c in r["cases"]]
    return out + table(["case", "hardware", "metric", "published", "predicted", "error"], rows, "lllrrr")


def view_ranks(names):
    """ranks RANKS.json [ONE_GPU.json]: each step of a `perfsim run --gpus N` report, predicted
    against measured (the slowest rank), memory per rank, the exposed communication, and with the
    same steps run on one GPU, the measured ratio of the ranks' step to it."""
    m = manifest()
    out = "".join(f"Source: `docs/results/{n}`, written by `{m.get(n, {}).get('command', '?')}`"
                  f"{'; measured ' + m[n]['measured'] if m.get(n, {}).get('measured') else ''}.\n\n" for n in names)
    steps = load(names[0])["results"][0]["steps"]
    single = {s["step"]: s for s in load(names[1])["results"][0]["steps"]} if len(names) > 1 else {}
    rows = []
    for s in steps:
        pr, me = s["predicted"], s.get("measured") or {}
        ranks = me.get("ranks") or []
        exposed = max((r.get("exposed_communication_s", 0) for r in ranks), default=None)
        one = single.get(s["step"], {}).get("measured", {}).get("step_time_s")
        ratio = f"{me['step_time_s'] / one:.3f}×" if one and me.get("step_time_s") else "—"
        rows.append([s["step"], seconds(pr["step_time_s"]), seconds(me.get("step_time_s")), pct(s.get("time_error"), True),
                     f"{gib(pr['peak_bytes_executed'])} / {gib(me.get('peak_bytes'))}",
                     f"{seconds(pr['parallel']['exposed_communication_s'])} / {seconds(exposed)}", ratio])
    return out + table(["step", "pred time", "meas time", "time err", "peak per rank, pred / meas",
                        "exposed comm., pred / meas", "ranks / one GPU (meas)"], rows, "lrrrrrr")


SERVE_FIGURES = [("ttft", "median", "TTFT p50"), ("ttft", "p99", "TTFT p99"), ("tpot", "median", "TPOT p50"),
                 ("tpot", "p99", "TPOT p99"), ("e2e", "median", "E2E p50"), ("e2e", "p99", "E2E p99"),
                 ("output_throughput", None, "output tok/s")]


def view_serve(names):
    """serve EXECUTED.json PREDICTED.json: each stack step's executed serving figures against the
    prediction of the same requests; error = (predicted - measured) / measured."""
    executed, predicted = load(names[0]), load(names[1])
    m = manifest()
    out = "".join(f"Source: `docs/results/{n}`, written by `{m.get(n, {}).get('command', '?')}`"
                  f"{'; measured ' + m[n]['measured'] if m.get(n, {}).get('measured', '').startswith('2') else ''}.\n\n"
                  for n in dict.fromkeys(names))  # an executed run holds its own prediction: once
    ex = executed["results"][0]["serve"]["steps"]
    pr = predicted["results"][0]["serve"]["steps"]
    rows = []
    for e, p in zip(ex, pr):
        me, mp = e["executed"]["metrics"], p["predicted"]["metrics"]
        cells = [e["step"]]
        for key, stat, _ in SERVE_FIGURES:
            a = mp[key][stat] if stat else mp[key]
            b = me[key][stat] if stat else me[key]
            cells.append(pct((a - b) / b, True) if b else "—")
        rows.append(cells)
    return out + table(["step"] + [w for _, _, w in SERVE_FIGURES], rows, "l" + "r" * len(SERVE_FIGURES))


def view_serve_speedups(names):
    """serve_speedups EXECUTED.json: each stack step's speedup over the first step, TPOT p50 and
    output tokens/s, measured and predicted; error = (predicted - measured) / measured."""
    run = load(names[0])
    steps = run["results"][0]["serve"]["steps"]
    first = steps[0]
    rows = []
    for s in steps[1:]:
        cells = [s["step"]]
        for key, stat, lower_is_better in (("tpot", "median", True), ("output_throughput", None, False)):
            def ratio(side):
                a = first[side]["metrics"][key]
                b = s[side]["metrics"][key]
                if stat:
                    a, b = a[stat], b[stat]
                return (a / b if lower_is_better else b / a) if a and b else None
            me, pr = ratio("executed"), ratio("predicted")
            cells += [f"{me:.2f}×" if me else "—", f"{pr:.2f}×" if pr else "—",
                      pct((pr - me) / me, True) if me and pr else "—"]
        rows.append(cells)
    head = ["step", "TPOT p50 speedup, measured", "predicted", "error", "output tok/s, measured", "predicted", "error"]
    return f"Against `{first['step']}`, from `docs/results/{names[0]}`.\n\n" + table(head, rows, "l" + "r" * 6)


VIEWS = {"serve": view_serve, "serve_speedups": view_serve_speedups, "published": view_published, "text": view_text, "overall": view_overall, "steps": view_steps, "speedups": view_speedups,
         "classes": view_classes, "op_times": view_op_times, "collectives": view_collectives, "ranks": view_ranks}


# ---- regions -------------------------------------------------------------------------------------

def render(spec, where):
    words = spec.split()
    if len(words) < 2 or words[0] not in VIEWS:
        sys.exit(f"docs_tables: {where}: bad region '{spec}': want VIEW FILE... with VIEW one of {', '.join(VIEWS)}")
    for n in words[1:]:
        if "=" not in n and not (RESULTS / n).is_file():
            sys.exit(f"docs_tables: {where}: no result file docs/results/{n}")
    return VIEWS[words[0]](words[1:])


def main():
    ap = argparse.ArgumentParser(description="Rewrite the generated tables of the docs from docs/results/.")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a region is out of date")
    args = ap.parse_args()
    stale, regions = [], 0
    for page in PAGES:
        path = ROOT / page
        text = path.read_text()

        def replace(m):
            nonlocal regions
            regions += 1
            line = text.count("\n", 0, m.start()) + 1
            body = render(m.group("spec"), f"{page}:{line}")
            if body != m.group("body"):
                stale.append(f"{page}:{line}: {m.group('spec')}")
            return m.group(1) + body + m.group(4)

        new = REGION.sub(replace, text)
        if new != text and not args.check:
            path.write_text(new)
    if args.check and stale:
        print("docs_tables: these generated regions differ from docs/results/ "
              "(run python3 scripts/docs_tables.py and commit the result):", file=sys.stderr)
        for s in stale:
            print("  " + s, file=sys.stderr)
        return 1
    verb = "checked" if args.check else "rewrote" if stale else "checked"
    print(f"docs_tables: {verb} {regions} regions in {len(PAGES)} pages" + (f", {len(stale)} changed" if stale and not args.check else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
