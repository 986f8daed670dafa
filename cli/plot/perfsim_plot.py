# Charts of a perfsim JSON report (perfsim run -o r.json, perfsim validate -o v.json) or trace
# (--trace t.json), drawn with matplotlib into SVG and PNG. perfsim carries this file in its binary and runs it as
# `python3 - REPORT DIR [options]` with the script on stdin (cli/charts.cpp), so it works from
# any install location.
#
# Exit status: 0 charts written; 1 an error, one "perfsim: error: ..." line on stderr; 3
# matplotlib cannot be imported (perfsim then tries another interpreter or says what to install).
#
# Every series carries a gid "series-<chart>-<what>" (one <g id=...> in the SVG), so tests can
# count what a chart holds. Output repeats byte for byte: the Agg backend, a fixed SVG hash
# salt, no dates in the metadata.
import argparse
import json
import math
import os
import shutil
import sys
import tempfile

EXIT_NO_MATPLOTLIB = 3

PREDICTED = "#4C72B0"
MEASURED = "#DD8452"
UNFIT = "#C44E52"      # steps whose memory exceeds the hardware's
# Behind a value label: lines and markers passing under it stay readable.
LABEL_BOX = {"boxstyle": "square,pad=0.05", "facecolor": "white", "edgecolor": "none", "alpha": 0.8}
CLASS_ORDER = ["gemm", "attention", "norm", "pointwise", "embedding", "loss", "optimizer", "memory",
               "communication", "host"]
CLASS_COLORS = {c: "C%d" % i for i, c in enumerate(CLASS_ORDER)}
ROLE_ORDER = ["weights", "master_weights", "gradients", "optimizer_states", "kv_cache", "inputs",
              "activations", "workspace"]
ROLE_COLORS = {"weights": "#4C72B0", "master_weights": "#8172B3", "gradients": "#C44E52",
               "optimizer_states": "#DD8452", "kv_cache": "#55A868", "inputs": "#937860",
               "activations": "#DA8BC3", "workspace": "#8C8C8C"}
# Roofs in greys, told apart by line style: the op classes own the colours.
ROOF_STYLES = [("#222222", "-"), ("#666666", "--"), ("#999999", "-."), ("#444444", ":")]


class Failure(Exception):
    """An error the user can act on: printed as one line, exit 1."""


class Skip(Exception):
    """The report lacks this chart's data; the reason is said on stderr."""


# ----------------------------------------------------------------------------------------------
# Figures as text

def time_unit(seconds):
    for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return scale, name
    return 1e-9, "ns"


def fmt_time(seconds):
    scale, name = time_unit(seconds)
    return "%.3g %s" % (seconds / scale, name)


def byte_unit(b):
    for scale, name in ((2.0 ** 40, "TiB"), (2.0 ** 30, "GiB"), (2.0 ** 20, "MiB"), (2.0 ** 10, "KiB")):
        if b >= scale:
            return scale, name
    return 1.0, "B"


def fmt_bytes(b):
    scale, name = byte_unit(b)
    return "%.3g %s" % (b / scale, name)


def fmt_rate(v, unit):
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return "%.3g %s%s" % (v / scale, prefix, unit)
    return "%.3g %s" % (v, unit)


def num(v):
    """A finite number from the report, else None (JSON null, missing)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def step_key(name):
    return name.lower().lstrip("+")


# ----------------------------------------------------------------------------------------------
# Drawing helpers

def setup_matplotlib():
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams.update({
        "svg.hashsalt": "perfsim",
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.fontsize": 8,
        "legend.frameon": False,
    })


def new_figure(width=8.0, height=5.0, rows=1, sharex=False, heights=None):
    import matplotlib.pyplot as plt
    kw = {"gridspec_kw": {"height_ratios": heights}} if heights else {}
    fig, axes = plt.subplots(rows, 1, figsize=(width, height), sharex=sharex, squeeze=False, **kw)
    return fig, [a[0] for a in axes]


def finish(fig, text, subtitle=""):
    """Title and subtitle above the axes (the subtitle wrapped to the figure's width), then the layout."""
    import textwrap
    width_in, height_in = fig.get_size_inches()
    lines = []
    for line in subtitle.split("\n") if subtitle else []:
        # About 15 characters an inch at 8 points: digits and capitals run wider than the average.
        lines += textwrap.wrap(line, width=int(width_in * 15)) or [""]
    # Plain text, not suptitle: tight_layout would make room for a suptitle a second time.
    fig.text(0.01, 1 - 0.08 / height_in, text, fontsize=11, ha="left", va="top")
    if lines:
        fig.text(0.01, 1 - 0.36 / height_in, "\n".join(lines), fontsize=8, color="#555555", ha="left", va="top",
                 linespacing=1.3)
    top = 1 - (0.42 + 0.15 * len(lines)) / height_in
    fig.tight_layout(rect=(0, 0, 1, top))


def bars(ax, xs, bottoms, heights, width, gid, color, hatch=None):
    """Vertical bars as one collection, so the SVG holds them as one group named gid."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle
    rects = [Rectangle((x - width / 2, b), width, h) for x, b, h in zip(xs, bottoms, heights)]
    coll = PatchCollection(rects, facecolor=color, edgecolor="white", linewidth=0.6,
                           hatch=hatch, gid=gid)
    ax.add_collection(coll)
    return coll


def proxy(color, label, hatch=None, marker=None, filled=True):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    if marker:
        return Line2D([], [], linestyle="none", marker=marker, color=color, label=label,
                      markerfacecolor=color if filled else "none")
    return Patch(facecolor=color, edgecolor="white", hatch=hatch, label=label)


def step_axis(ax, names):
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center")
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.grid(axis="x", visible=False)


# ----------------------------------------------------------------------------------------------
# A run report: one sweep point's steps

class RunReport:
    def __init__(self, doc, args, shown):
        results = doc.get("results")
        if not isinstance(results, list) or not results:
            raise Failure("%s holds no results" % shown)
        self.results = results
        if args.point < 1 or args.point > len(results):
            raise Failure("--point %d: the report holds %d sweep point%s" %
                          (args.point, len(results), "" if len(results) == 1 else "s"))
        self.point = results[args.point - 1]
        self.steps = [s for s in self.point.get("steps", []) if isinstance(s, dict)]
        # A serving scenario has no model steps: its stack steps are engine runs under "serve".
        self.serve = serve_steps(self.point)
        if not self.steps and not self.serve:
            raise Failure("%s: sweep point %d holds no steps" % (shown, args.point))
        self.step_name = args.step
        if args.step and not any(step_key(s.get("step", "")) == step_key(args.step) for s in self.steps + self.serve):
            names = ", ".join(s.get("step", "") for s in self.steps + self.serve)
            raise Failure("--step %s: no such step (the steps: %s)" % (args.step, names))

    def label(self):
        sweep = self.point.get("sweep") or {}
        where = self.point.get("scenario", "?")
        if sweep:
            where += " [" + ", ".join("%s=%s" % kv for kv in sorted(sweep.items())) + "]"
        return where

    def pick(self, has):
        """--step when given, else the last step for which has(step) holds."""
        if self.step_name:
            for s in self.steps:
                if step_key(s.get("step", "")) == step_key(self.step_name):
                    return s
        for s in reversed(self.steps):
            if has(s):
                return s
        return None

    def device_line(self, s):
        p = s.get("predicted") or {}
        m = s.get("measured")
        text = "predicted on %s (%s)" % (p.get("hardware", "?"), p.get("profile", "?"))
        if m:
            text += "; measured on %s, %s" % (m.get("backend", "?"), m.get("device", "?"))
        return text


def measured_of(s):
    m = s.get("measured")
    return m if isinstance(m, dict) else None


def chart_roofline(rep):
    def placed(s):
        return any(num(o.get("flops")) for o in s.get("ops", []))
    s = rep.pick(lambda s: measured_of(s) is not None and placed(s)) or rep.pick(placed)
    if s is None:
        raise Skip("no step has ops with FLOPs")
    p = s.get("predicted") or {}
    peaks = {k: num(v) for k, v in (p.get("peak_flops_s") or {}).items() if num(v)}
    bandwidth = num(p.get("memory_bandwidth_bytes_s"))
    if not peaks or not bandwidth:
        raise Skip("the report holds no peak FLOP/s and memory bandwidth (written by an earlier perfsim)")
    ops = s.get("ops", [])
    with_flops = [o for o in ops if num(o.get("flops")) and num(o.get("intensity"))]
    if not with_flops:
        raise Skip("step %s has no ops with FLOPs" % s.get("step"))
    unplaced = len(ops) - len(with_flops)

    fig, (ax,) = new_figure(8.0, 5.6)
    xs = [num(o["intensity"]) for o in with_flops]
    x_lo = min(xs) / 3
    dtypes = []
    for o in with_flops:
        d = o.get("dtype")
        if d in peaks and d not in dtypes:
            dtypes.append(d)
    if not dtypes:
        dtypes = [max(peaks, key=peaks.get)]
    ridge_max = max(peaks[d] / bandwidth for d in dtypes)
    x_hi = max(max(xs) * 3, ridge_max * 4)

    import numpy as np
    grid = np.logspace(math.log10(x_lo), math.log10(x_hi), 200)
    for i, d in enumerate(dtypes):
        roof = np.minimum(peaks[d], bandwidth * grid)
        color, style = ROOF_STYLES[i % len(ROOF_STYLES)]
        ax.plot(grid, roof, color=color, linestyle=style, linewidth=1.6, gid="roof-" + d,
                label="%s roof: %s, %s" % (d, fmt_rate(peaks[d], "FLOP/s"), fmt_rate(bandwidth, "B/s")))
        ax.annotate("ridge %.3g FLOP/B" % (peaks[d] / bandwidth), (peaks[d] / bandwidth, peaks[d]),
                    textcoords="offset points", xytext=(4, 4), fontsize=7, color="#555555")

    pred_x, pred_y, pred_c = [], [], []
    meas_x, meas_y, meas_c = [], [], []
    pairs = []
    for o in with_flops:
        x = num(o["intensity"])
        f = num(o["flops"])
        c = CLASS_COLORS.get(o.get("class"), "black")
        t = num(o.get("predicted_s"))
        yp = f / t if t else None
        if yp:
            pred_x.append(x), pred_y.append(yp), pred_c.append(c)
        tm = num(o.get("measured_median_s"))
        ym = f / tm if tm else None
        if ym:
            meas_x.append(x), meas_y.append(ym), meas_c.append(c)
        if yp and ym:
            pairs.append([(x, yp), (x, ym)])
    from matplotlib.collections import LineCollection
    if pairs:
        ax.add_collection(LineCollection(pairs, colors="#999999", linewidths=0.6, gid="pairs"))
    ax.scatter(pred_x, pred_y, s=28, facecolors="none", edgecolors=pred_c, linewidths=1.1,
               gid="series-roofline-predicted", zorder=3)
    if meas_x:
        ax.scatter(meas_x, meas_y, s=16, c=meas_c, gid="series-roofline-measured", zorder=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ys = pred_y + meas_y
    ax.set_ylim(min(ys) / 3, max(peaks[d] for d in dtypes) * 2)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s (FLOPs ÷ op time)")

    classes = [c for c in CLASS_ORDER if any(o.get("class") == c for o in with_flops)]
    handles, _ = ax.get_legend_handles_labels()
    handles += [proxy("#333333", "predicted", marker="o", filled=False)]
    if meas_x:
        handles += [proxy("#333333", "measured", marker="o")]
    handles += [proxy(CLASS_COLORS[c], c, marker="s") for c in classes]
    ax.legend(handles=handles, loc="lower right", ncol=2)
    note = "each op of one step at its predicted time (hollow)"
    if meas_x:
        note += " and measured median (filled), joined by a line"
    if unplaced:
        note += "; %d op%s without FLOPs (copies, embeddings) not placed" % (unplaced, "" if unplaced == 1 else "s")
    finish(fig, "Roofline — %s, step %s" % (rep.label(), s.get("step")), rep.device_line(s) + "\n" + note)
    return fig


def chart_stack(rep):
    steps = rep.steps
    if len(steps) < 2:
        raise Skip("one stack step: no optimization to compare")
    names = [s.get("step", "?") for s in steps]
    pred = [num((s.get("predicted") or {}).get("step_time_s")) for s in steps]
    meas = [num((measured_of(s) or {}).get("step_time_s")) for s in steps]
    pred_sp = [num((s.get("predicted") or {}).get("speedup")) for s in steps]
    meas_sp = [num((measured_of(s) or {}).get("speedup")) for s in steps]
    # A step whose predicted memory exceeds the hardware's is no speedup anyone can have: its
    # bars and points are drawn apart and say so.
    fits = [(s.get("predicted") or {}).get("fits", True) is not False for s in steps]
    if not any(pred):
        raise Skip("no predicted step times")
    have_meas = any(meas)
    scale, unit = time_unit(max(v for v in pred + meas if v))

    fig, (top, bottom) = new_figure(8.0, 6.2, rows=2, sharex=True, heights=[3, 2])
    width = 0.36 if have_meas else 0.6
    sides = [("predicted", pred, PREDICTED, -width / 2 if have_meas else 0.0)]
    if have_meas:
        sides.append(("measured", meas, MEASURED, width / 2))
    for side, times, color, offset in sides:
        # Waterfall: each bar floats from the step before it (the last one with a time) to this
        # step, hatched where the step got slower.
        xs, lows, heights, slower, levels = [], [], [], [], []
        prev = None
        for i, t in enumerate(times):
            if t is None:
                continue
            lo, hi = (0.0, t) if prev is None else (min(prev, t), max(prev, t))
            xs.append(i + offset)
            lows.append(lo / scale)
            heights.append((hi - lo) / scale)
            slower.append(prev is not None and t > prev)
            levels.append(t / scale)
            top.annotate(fmt_time(t), (i + offset, t / scale), textcoords="offset points", xytext=(0, 2),
                         ha="center", fontsize=7)
            prev = t
        step_of = [i for i, t in enumerate(times) if t is not None]
        unfit = [k for k in range(len(xs)) if side == "predicted" and not fits[step_of[k]]]
        fast = [k for k in range(len(xs)) if not slower[k] and k not in unfit]
        slow = [k for k in range(len(xs)) if slower[k] and k not in unfit]
        bars(top, [xs[k] for k in fast], [lows[k] for k in fast], [heights[k] for k in fast], width,
             "series-stack-time-%s" % side, color)
        if slow:
            bars(top, [xs[k] for k in slow], [lows[k] for k in slow], [heights[k] for k in slow], width,
                 "slower-stack-time-%s" % side, color, hatch="///")
        if unfit:
            bars(top, [xs[k] for k in unfit], [lows[k] for k in unfit], [heights[k] for k in unfit], width,
                 "unfit-stack-time-%s" % side, UNFIT, hatch="xx")
        # A thin line carries each step's time to the next bar, where that bar starts.
        for k in range(len(xs) - 1):
            top.plot([xs[k] + width / 2, xs[k + 1] - width / 2], [levels[k]] * 2, color="#999999",
                     linewidth=0.6, gid="link-%s-%d" % (side, k))
    top.set_ylabel("step time (%s)" % unit)
    top.set_ylim(0, max(v for v in pred + meas if v) / scale * 1.15)
    handles = [proxy(PREDICTED, "predicted")]
    if have_meas:
        handles.append(proxy(MEASURED, "measured"))
    handles.append(proxy("#bbbbbb", "slower than\nthe step before", hatch="///"))
    if not all(fits):
        handles.append(proxy(UNFIT, "does not fit\nin memory", hatch="xx"))
    top.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    for side, values, color, marker in (("predicted", pred_sp, PREDICTED, "o"), ("measured", meas_sp, MEASURED, "s")):
        pts = [(i, v) for i, v in enumerate(values) if v is not None]
        if not pts or (side == "measured" and not have_meas):
            continue
        bottom.plot([i for i, _ in pts], [v for _, v in pts], marker=marker, color=color, linewidth=1.4,
                    label=side, gid="series-stack-speedup-%s" % side)
        lost = [(i, v) for i, v in pts if side == "predicted" and not fits[i]]
        if lost:
            # Hollow: a speedup the step's memory does not allow.
            bottom.plot([i for i, _ in lost], [v for _, v in lost], linestyle="none", marker=marker,
                        markerfacecolor="white", markeredgecolor=UNFIT, markersize=8, gid="unfit-stack-speedup")
        for i, v in pts:
            unfit = side == "predicted" and not fits[i]
            bottom.annotate("%.3g×%s" % (v, " (does not fit)" if unfit else ""), (i, v), textcoords="offset points",
                            bbox=LABEL_BOX,
                            xytext=(0, 5 if side == "predicted" else -11), ha="center", fontsize=7,
                            color=UNFIT if unfit else color)
    bottom.axhline(1.0, color="#999999", linewidth=0.8, linestyle=":")
    bottom.set_ylabel("speedup (throughput ×)")
    bottom.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    step_axis(bottom, names)
    finish(fig, "Optimization stack — %s" % rep.label(),
          rep.device_line(steps[0]) + "\nsteps are cumulative; speedup is %s/s over the first step"
          % rep.point.get("throughput_unit", "tokens"))
    return fig


def stacked_pairs(ax, steps, keys, colors, get_pred, get_meas, scale, chart):
    """Per step a stacked predicted bar and, where given, a stacked measured bar (hatched)."""
    have_pred = any(get_pred(s) for s in steps)
    have_meas = any(get_meas(s) for s in steps)
    width = 0.36 if have_pred and have_meas else 0.6
    sides = []
    if have_pred:
        sides.append(("predicted", get_pred, -width / 2 if have_meas else 0.0, None))
    if have_meas:
        sides.append(("measured", get_meas, width / 2 if have_pred else 0.0, "///"))
    tops = []
    for side, get, offset, hatch in sides:
        bottoms = [0.0] * len(steps)
        for key in keys:
            xs, lows, hs = [], [], []
            for i, s in enumerate(steps):
                d = get(s)
                v = num((d or {}).get(key))
                if not d or not v:
                    continue
                xs.append(i + offset)
                lows.append(bottoms[i])
                hs.append(v / scale)
                bottoms[i] += v / scale
            if xs:
                bars(ax, xs, lows, hs, width, "series-%s-%s-%s" % (chart, side, key), colors[key], hatch=hatch)
        tops += bottoms
    return have_meas, max(tops) if tops else 0.0


def chart_memory(rep):
    steps = rep.steps
    pred = lambda s: (s.get("predicted") or {}).get("bytes_by_role_at_peak")
    measured_roles = lambda s: (measured_of(s) or {}).get("bytes_by_role_at_peak")
    # The measured peak is the executed graph's: beside the whole model's only when the graph
    # holds every layer; else in a panel of its own, against the predicted executed peak.
    sampled = any((s.get("layers_built") or 0) < (s.get("layers_total") or 0) for s in steps)
    meas = (lambda s: None) if sampled else measured_roles
    executed = sampled and any(measured_roles(s) for s in steps)
    roles = [r for r in ROLE_ORDER
             if any(num((pred(s) or {}).get(r)) or num((measured_roles(s) or {}).get(r)) for s in steps)]
    roles += sorted({r for s in steps for r in list((pred(s) or {})) + list((measured_roles(s) or {}))
                     if r not in ROLE_ORDER and (num((pred(s) or {}).get(r)) or num((measured_roles(s) or {}).get(r)))})
    if not roles:
        raise Skip("no bytes by role at the peak")
    colors = dict(ROLE_COLORS)
    for i, r in enumerate(roles):
        colors.setdefault(r, "C%d" % (i % 10))
    peak = max(sum(num(v) or 0 for v in (pred(s) or {}).values()) for s in steps)
    scale, unit = byte_unit(max(peak, 1.0))
    if executed:
        fig, (ax, low) = new_figure(8.0, 7.0, rows=2, sharex=True)
    else:
        fig, (ax,) = new_figure(8.0, 5.2)
    have_meas, top = stacked_pairs(ax, steps, roles, colors, pred, meas, scale, "memory")
    capacity = num((steps[0].get("predicted") or {}).get("memory_capacity_bytes"))
    note = "predicted: whole model at its peak"
    if have_meas:
        note += "; measured (hatched): the backend allocator's peak"
    if capacity and capacity / scale <= 2 * top:
        ax.axhline(capacity / scale, color="#C44E52", linestyle="--", linewidth=1.0, gid="capacity")
        ax.annotate("%s memory %s" % ((steps[0].get("predicted") or {}).get("hardware", ""), fmt_bytes(capacity)),
                    (-0.5, capacity / scale), textcoords="offset points", xytext=(2, 3), fontsize=7,
                    color="#C44E52")
        top = max(top, capacity / scale)
    elif capacity:
        note += "; device memory %s (off scale)" % fmt_bytes(capacity)
    ax.set_ylim(0, top * 1.12 if top else 1)
    ax.set_ylabel("whole model (%s)" % unit if executed else "peak memory (%s)" % unit)
    step_axis(ax, [s.get("step", "?") for s in steps])
    if executed:
        built = [(s.get("layers_built"), s.get("layers_total")) for s in steps][0]
        low_peak = max([sum(num(v) or 0 for v in (measured_roles(s) or {}).values()) for s in steps] +
                       [num((s.get("predicted") or {}).get("peak_bytes_executed")) or 0 for s in steps])
        low_scale, low_unit = byte_unit(max(low_peak, 1.0))
        _, low_top = stacked_pairs(low, steps, roles, colors, lambda s: None, measured_roles, low_scale, "memory")
        xs = [i for i, s in enumerate(steps) if num((s.get("predicted") or {}).get("peak_bytes_executed"))]
        ys = [num(steps[i]["predicted"]["peak_bytes_executed"]) / low_scale for i in xs]
        low.scatter(xs, ys, marker="_", s=900, linewidths=2.0, color="#222222", gid="series-memory-executed-predicted",
                    zorder=3)
        low.set_ylim(0, max([low_top] + ys) * 1.15)
        low.set_ylabel("graph as executed (%s)" % low_unit)
        step_axis(low, [s.get("step", "?") for s in steps])
        note += ("; below, the graph as executed (%s of %s layers): measured by role (hatched) and the "
                 "predicted peak of that graph (black line)" % built)
    handles = [proxy(colors[r], r.replace("_", " ")) for r in reversed(roles)]
    if have_meas or executed:
        handles.append(proxy("#bbbbbb", "measured", hatch="///"))
    if executed:
        handles.append(proxy("#222222", "predicted, as executed", marker="_"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    finish(fig, "Peak memory by role — %s" % rep.label(), rep.device_line(steps[0]) + "\n" + note)
    return fig


def chart_op_classes(rep):
    steps = rep.steps
    pred = lambda s: (s.get("predicted") or {}).get("time_by_class_s")
    meas = lambda s: (measured_of(s) or {}).get("time_by_class_s")
    present = {c for s in steps for d in (pred(s), meas(s)) for c, v in (d or {}).items() if num(v)}
    classes = [c for c in CLASS_ORDER if c in present] + sorted(present - set(CLASS_ORDER))
    if not classes:
        raise Skip("no time by op class")
    colors = dict(CLASS_COLORS)
    for i, c in enumerate(classes):
        colors.setdefault(c, "C%d" % (i % 10))
    biggest = max(sum(num(v) or 0 for v in (d or {}).values()) for s in steps for d in (pred(s), meas(s)))
    scale, unit = time_unit(max(biggest, 1e-12))
    fig, (ax,) = new_figure(8.0, 5.2)
    have_meas, top = stacked_pairs(ax, steps, classes, colors, pred, meas, scale, "op_classes")
    ax.set_ylim(0, top * 1.12 if top else 1)
    ax.set_ylabel("Σ op time × count (%s)" % unit)
    step_axis(ax, [s.get("step", "?") for s in steps])
    handles = [proxy(colors[c], c) for c in reversed(classes)]
    if have_meas:
        handles.append(proxy("#bbbbbb", "measured", hatch="///"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    note = "whole model; classes need not add up to the step time (host overhead, streams that overlap)"
    finish(fig, "Time by op class — %s" % rep.label(),
          rep.device_line(steps[0]) + "\npredicted" + (" (left) vs measured (hatched)" if have_meas else "") +
          "; " + note)
    return fig


def gpus_of(s):
    par = (s.get("predicted") or {}).get("parallel")
    g = num((par or {}).get("gpus"))
    return int(g) if g else 1


def chart_scaling(rep):
    # Every (sweep point, step): its GPUs and tokens/s; series by step and the other sweep axes.
    entries = []
    for r in rep.results:
        sweep = {k: v for k, v in sorted((r.get("sweep") or {}).items()) if k != "gpus"}
        for s in r.get("steps", []):
            p = s.get("predicted") or {}
            m = measured_of(s) or {}
            entries.append({
                "gpus": gpus_of(s), "step": s.get("step", "?"),
                "series": s.get("step", "?") + "".join(" %s=%s" % kv for kv in sweep.items()),
                "pred": num(p.get("tokens_per_s")), "meas": num(m.get("tokens_per_s")),
                "fits": p.get("fits", True) is not False,
            })
    counts = sorted({e["gpus"] for e in entries})
    if len(counts) < 2:
        raise Skip("every step runs on %d GPU%s: no scaling to draw" % (counts[0], "" if counts[0] == 1 else "s"))
    series = {}
    for e in entries:
        series.setdefault(e["series"], []).append(e)
    series = {k: v for k, v in series.items() if len({e["gpus"] for e in v}) > 1}
    if not series:
        # The GPU count changes from step to step, not between sweep points: one curve of steps.
        series = {"steps": entries}
    fig, (top, bottom) = new_figure(8.0, 6.4, rows=2, sharex=True)
    for i, (label, pts) in enumerate(series.items()):
        pts = sorted(pts, key=lambda e: e["gpus"])
        color = "C%d" % (i % 10)
        for side, style, marker in (("pred", "-", "o"), ("meas", "--", "s")):
            fit = [e for e in pts if e[side] and e["fits"]]
            if not fit:
                continue
            name = "predicted" if side == "pred" else "measured"
            top.plot([e["gpus"] for e in fit], [e[side] for e in fit], style, marker=marker, color=color,
                     label="%s, %s" % (label, name), gid="series-scaling-tokens-%s-%d" % (name, i))
            base = fit[0]
            eff = [(e[side] / e["gpus"]) / (base[side] / base["gpus"]) * 100 for e in fit]
            bottom.plot([e["gpus"] for e in fit], eff, style, marker=marker, color=color,
                        gid="series-scaling-efficiency-%s-%d" % (name, i))
            if side == "pred":
                top.plot([e["gpus"] for e in fit], [base[side] * e["gpus"] / base["gpus"] for e in fit], ":",
                         color=color, linewidth=0.8, gid="ideal-%d" % i)
        lost = [e for e in pts if e["pred"] and not e["fits"]]
        if lost:
            top.scatter([e["gpus"] for e in lost], [e["pred"] for e in lost], marker="x", color=color,
                        gid="does-not-fit-%d" % i, zorder=3)
        if label == "steps":
            for e in pts:
                if e["pred"]:
                    top.annotate(e["step"], (e["gpus"], e["pred"]), textcoords="offset points", xytext=(4, -8),
                                 fontsize=7)
    top.set_xscale("log", base=2)
    top.set_yscale("log")
    top.set_ylabel("tokens/s (every GPU)")
    handles, _ = top.get_legend_handles_labels()
    handles.append(proxy("#333333", "does not fit memory", marker="x"))
    handles.append(_dotted("linear scaling"))
    top.legend(handles=handles, loc="upper left", fontsize=7)
    bottom.axhline(100, color="#999999", linewidth=0.8, linestyle=":")
    bottom.set_ylabel("scaling efficiency (%)")
    bottom.set_xlabel("GPUs")
    bottom.set_xticks(counts)
    bottom.set_xticklabels([str(c) for c in counts])
    bottom.set_ylim(0, max(110, bottom.get_ylim()[1]))
    point = rep.results[0]
    finish(fig, "Scaling — %s" % point.get("scenario", "?"),
          "tokens/s and efficiency (tok/s per GPU ÷ that at the fewest GPUs that fit) vs GPUs; "
          "predicted solid, measured dashed")
    return fig


def _dotted(label):
    from matplotlib.lines import Line2D
    return Line2D([], [], linestyle=":", color="#333333", label=label)


def chart_ranks(rep):
    def measured_ranks(s):
        return (measured_of(s) or {}).get("ranks") or []

    def predicted_ranks(s):
        return ((s.get("predicted") or {}).get("parallel") or {}).get("ranks") or []

    s = rep.pick(lambda s: bool(measured_ranks(s))) or rep.pick(lambda s: bool(predicted_ranks(s)))
    if s is None:
        raise Skip("no step runs over several GPUs")
    if not (measured_ranks(s) or predicted_ranks(s)):
        raise Skip("step %s runs on one GPU" % s.get("step"))
    stages = {int(r.get("stage", 0)): r for r in predicted_ranks(s)}
    ranks = measured_ranks(s)
    if not ranks and len(stages) < 2:
        raise Skip("the layout's ranks are alike (one pipeline stage) and none was measured")
    if ranks:
        labels = ["rank %d\nstage %d" % (r.get("rank", i), r.get("stage", 0)) for i, r in enumerate(ranks)]
        pred_t = [num((stages.get(int(r.get("stage", 0))) or {}).get("own_step_time_s")) for r in ranks]
        pred_x = [num((stages.get(int(r.get("stage", 0))) or {}).get("exposed_communication_s")) for r in ranks]
        meas_t = [num(r.get("step_time_s")) for r in ranks]
        meas_x = [num(r.get("exposed_communication_s")) for r in ranks]
    else:
        order = sorted(stages)
        labels = ["stage %d" % k for k in order]
        pred_t = [num(stages[k].get("own_step_time_s")) for k in order]
        pred_x = [num(stages[k].get("exposed_communication_s")) for k in order]
        meas_t = meas_x = [None] * len(order)
    biggest = max([v for v in pred_t + meas_t + pred_x + meas_x if v] or [1e-9])
    scale, unit = time_unit(biggest)
    fig, axes = new_figure(8.0, 6.0, rows=2, sharex=True)
    have_meas = any(meas_t)
    width = 0.36 if have_meas else 0.6
    for ax, what, pred, meas in ((axes[0], "time", pred_t, meas_t), (axes[1], "exposed", pred_x, meas_x)):
        for side, values, color, offset in (("predicted", pred, PREDICTED, -width / 2 if have_meas else 0.0),
                                            ("measured", meas, MEASURED, width / 2)):
            pts = [(i, v) for i, v in enumerate(values) if v is not None]
            if not pts:
                continue
            bars(ax, [i + offset for i, _ in pts], [0.0] * len(pts), [v / scale for _, v in pts], width,
                 "series-ranks-%s-%s" % (what, side), color)
            for i, v in pts:
                ax.annotate(fmt_time(v) if v else "0", (i + offset, v / scale), textcoords="offset points",
                            xytext=(0, 2), ha="center", fontsize=7)
        ax.set_ylim(0, max([v / scale for v in pred + meas if v] or [1]) * 1.18)
        step_axis(ax, labels)
    layout_step = num((s.get("predicted") or {}).get("step_time_s"))
    if layout_step:
        axes[0].axhline(layout_step / scale, color=PREDICTED, linestyle="--", linewidth=0.9, gid="layout-step")
        axes[0].set_ylim(0, max(axes[0].get_ylim()[1], layout_step / scale * 1.18))
    axes[0].set_ylim(0, axes[0].get_ylim()[1] * 1.3)  # room for the legend above the bars
    axes[0].set_ylabel("step time (%s)" % unit)
    axes[1].set_ylabel("exposed communication (%s)" % unit)
    handles = [proxy(PREDICTED, "predicted (its stage's own timeline)")]
    if layout_step:
        from matplotlib.lines import Line2D
        handles.append(Line2D([], [], color=PREDICTED, linestyle="--", label="predicted step of the layout"))
    if have_meas:
        handles.append(proxy(MEASURED, "measured"))
    axes[0].legend(handles=handles, loc="upper right")
    layout = ((s.get("predicted") or {}).get("parallel") or {}).get("layout", "")
    finish(fig, "Per rank — %s, step %s (%s)" % (rep.label(), s.get("step"), layout),
          rep.device_line(s) + "\nexposed: the part of the step spent waiting for collectives")
    return fig


# ----------------------------------------------------------------------------------------------
# A serving run (workload = serve{...}): per stack step the engine's predicted run under "serve",
# and beside it the run the backend executed, where the step ran

P50 = "#4C72B0"
P99 = "#C44E52"
KV_COLOR = ROLE_COLORS["kv_cache"]
DECODE_COLOR = "#4C72B0"
PREFILL_COLOR = "#C44E52"
MAX_TIMELINE_PANELS = 8
MAX_ERROR_COLUMNS = 4
LOAD_KEYS = ("rate", "users")  # sweep keys that vary the load of a serving scenario
RUNS = ("predicted", "executed")  # a stack step's runs, as the report names them


def serve_steps(point):
    serve = point.get("serve") if isinstance(point, dict) else None
    steps = serve.get("steps") if isinstance(serve, dict) else None
    return [s for s in steps or [] if isinstance(s, dict)]


def serve_part(s, *keys, run="predicted"):
    """s[run][keys...] as a dict ({} where missing); run is "predicted" or "executed"."""
    d = s
    for k in (run,) + keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d if isinstance(d, dict) else {}


def executed(s):
    return isinstance(s.get("executed"), dict)


def runs_of(s):
    return RUNS if executed(s) else RUNS[:1]


def latency(metrics, what, stat):
    d = metrics.get(what)
    return num(d.get(stat)) if isinstance(d, dict) else None


def step_color(i):
    return "C%d" % (i % 10)


def run_line(run, measured):
    """Keyword arguments of a series of `run`: once a chart holds measured series, predicted ones
    are dashed with hollow markers and measured ones solid and filled; a chart of predictions alone
    keeps its own styles."""
    if not measured:
        return {}
    if run == "executed":
        return {"linestyle": "-"}
    return {"linestyle": "--", "markerfacecolor": "white"}


def run_handles(backend, marker=None):
    """Legend entries for the two line styles of run_line."""
    from matplotlib.lines import Line2D
    kw = {"marker": marker, "markersize": 4} if marker else {}
    return [Line2D([], [], color="#333333", label="predicted", **dict(kw, **run_line("predicted", True))),
            Line2D([], [], color="#333333", label="measured (%s)" % backend, **dict(kw, **run_line("executed", True)))]


def serve_backend(point):
    return point.get("backend", "?") if isinstance(point, dict) else "?"


def serve_line(rep):
    traffic = (rep.point.get("serve") or {}).get("traffic", "")
    hardware = []
    for s in rep.serve:
        if s.get("hardware", "?") not in hardware:
            hardware.append(s.get("hardware", "?"))
    text = "%s; predicted on %s" % (traffic or "serving", ", ".join(hardware))
    if any(executed(s) for s in rep.serve):
        text += "; measured on %s (%s)" % (serve_backend(rep.point), rep.point.get("device", "?"))
        alone = [s.get("step", "?") for s in rep.serve if not executed(s)]
        if alone:
            text += ", %s predicted only" % ", ".join(alone)
    return text


def plain_log(ax, axis="y"):
    """A log axis labelled 0.1, 1, 10 rather than 10^n; its minor ticks labelled too where it spans less
    than a decade (otherwise no tick would carry a number)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    which = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    plain = FuncFormatter(lambda v, _: "%g" % v)
    which.set_major_formatter(plain)
    which.set_minor_formatter(plain if lo > 0 and hi / lo < 10 else NullFormatter())


def need_serve(rep):
    if not rep.serve:
        raise Skip("sweep point %s is not a serving run" % rep.label())


def chart_serve_latency_cdf(rep):
    need_serve(rep)
    measured = any(executed(s) for s in rep.serve)
    series = []
    for i, s in enumerate(rep.serve):
        for run in runs_of(s):
            req = serve_part(s, "requests", run=run)
            ttft = sorted(v for v in (num(x) for x in req.get("ttft") or []) if v and v > 0)
            e2e = sorted(v for v in (num(x) for x in req.get("e2e") or []) if v and v > 0)
            series.append((i, s.get("step", "?"), run, {"ttft": ttft, "e2e": e2e}))
    if not any(v for _, _, _, d in series for v in d.values()):
        raise Skip("no step served a request")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 4.8), sharey=True)
    for ax, key, what in ((axes[0], "ttft", "TTFT: arrival to first token"),
                          (axes[1], "e2e", "E2E: arrival to last token")):
        for i, name, run, d in series:
            values = d[key]
            if not values:
                continue
            n = len(values)
            side = "" if run == "predicted" else "measured-"
            ax.step([v * 1e3 for v in values], [(j + 1) / n for j in range(n)], where="post", color=step_color(i),
                    linewidth=1.4, label="%s (%d)" % (name, n) if run == "predicted" else None,
                    gid="series-serve_latency_cdf-%s-%s%d" % (key, side, i), **run_line(run, measured))
        for q, text in ((0.5, "p50"), (0.99, "p99")):
            ax.axhline(q, color="#999999", linewidth=0.7, linestyle=":")
            ax.text(0.0, q, " " + text, transform=ax.get_yaxis_transform(), fontsize=7, color="#777777", va="bottom")
        ax.set_xscale("log")
        plain_log(ax, "x")
        ax.set_xlabel("%s (ms, log)" % what)
        ax.set_ylim(0, 1.03)
    axes[0].set_ylabel("fraction of requests")
    note = ("the fraction of served requests within each latency (refused requests left out); dotted: the median "
            "and the 99th percentile")
    if measured:
        # A solid line per step in the legend: the line styles have their own entries.
        from matplotlib.lines import Line2D
        handles = []
        for i, s in enumerate(rep.serve):
            counts = {run: len(d["e2e"]) for j, _, run, d in series if j == i}
            if not any(counts.values()):
                continue
            label = "%s (%d" % (s.get("step", "?"), counts["predicted"])
            if "executed" in counts and counts["executed"] != counts["predicted"]:
                label += "; measured %d" % counts["executed"]
            handles.append(Line2D([], [], color=step_color(i), linewidth=1.4, label=label + ")"))
        axes[1].legend(handles=handles + run_handles(serve_backend(rep.point)), loc="lower right",
                       title="step (served requests)", title_fontsize=8)
        note += "; dashed: predicted, solid: the run measured on the backend"
    else:
        axes[1].legend(loc="lower right", title="step (served requests)", title_fontsize=8)
    finish(fig, "Serving latency CDF — %s" % rep.label(), serve_line(rep) + "\n" + note)
    return fig


def chart_serve_percentiles(rep):
    need_serve(rep)
    names = [s.get("step", "?") for s in rep.serve]
    measured = any(executed(s) for s in rep.serve)
    runs = RUNS if measured else RUNS[:1]
    metrics = {run: [serve_part(s, "metrics", run=run) for s in rep.serve] for run in runs}
    panels = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E"))
    if not any(latency(m, k, "median") for ms in metrics.values() for m in ms for k, _ in panels):
        raise Skip("no latency figures: no step served a request")
    # Measured points beside the predicted ones, each with its label on its own side.
    shift = {"predicted": -0.14, "executed": 0.14} if measured else {"predicted": 0.0}
    fig, axes = new_figure(8.0, 7.8, rows=3, sharex=True)
    for ax, (key, title) in zip(axes, panels):
        values = [v for ms in metrics.values() for m in ms for v in (latency(m, key, "median"), latency(m, key, "p99"))
                  if v]
        step_axis(ax, names)
        if not values:
            ax.text(0.5, 0.5, "no %s: every request had one output token" % title, transform=ax.transAxes,
                    ha="center", va="center", fontsize=8, color="#777777")
            ax.set_yticks([])
            continue
        scale, unit = time_unit(max(values))
        for run in runs:
            dx = shift[run]
            for stat, label, color, style, marker, dy in (("median", "p50", P50, "-", "o", -11),
                                                          ("p99", "p99", P99, "--", "s", 5)):
                pts = [(i + dx, latency(m, key, stat)) for i, m in enumerate(metrics[run])]
                pts = [(x, v) for x, v in pts if v]
                if not pts:
                    continue
                kw = dict({"linestyle": style}, **run_line(run, measured))
                side = "" if run == "predicted" else "-measured"
                ax.plot([x for x, _ in pts], [v / scale for _, v in pts], marker=marker, color=color,
                        linewidth=1.2, label=label if run == "predicted" else None,
                        gid="series-serve_percentiles-%s-%s%s" % (key, label, side), **kw)
                place = {"ha": "center"} if not measured else (
                    {"ha": "right", "xytext": (-4, dy)} if run == "predicted" else {"ha": "left", "xytext": (4, dy)})
                for x, v in pts:
                    ax.annotate(fmt_time(v), (x, v / scale), textcoords="offset points", bbox=LABEL_BOX,
                                **dict({"xytext": (0, dy), "fontsize": 7, "color": color}, **place))
        # Steps that change a latency a thousandfold (static batching's queue) need a log axis.
        if max(values) / min(values) > 30:
            ax.set_yscale("log")
            ax.set_ylim(min(values) / scale / 3, max(values) / scale * 4)
            plain_log(ax)
        else:
            ax.set_ylim(0, max(values) / scale * 1.25)
        ax.set_ylabel("%s (%s)" % (title, unit))
    note = ("TTFT: arrival to first token; TPOT: (E2E − TTFT) ÷ (output − 1) per request; E2E: arrival to last "
            "token (vLLM's definitions); ")
    if measured:
        from matplotlib.lines import Line2D
        handles = [Line2D([], [], color=P50, marker="o", linestyle="none", label="p50"),
                   Line2D([], [], color=P99, marker="s", linestyle="none", label="p99")]
        axes[0].legend(handles=handles + run_handles(serve_backend(rep.point), "o"), loc="upper left",
                       bbox_to_anchor=(1.0, 1.0))
        note += "p50 circles, p99 squares; predicted dashed and hollow (left), measured solid and filled (right)"
    else:
        axes[0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        note += "p50 solid, p99 dashed"
    finish(fig, "Serving latency percentiles — %s" % rep.label(), serve_line(rep) + "\n" + note)
    return fig


def timeline_rows(s, run):
    """(start, batch, KV used, duration) of each engine step of a stack step's run."""
    tl = serve_part(s, "timeline", run=run)
    starts = tl.get("t") or []
    pad = lambda values: list(values or []) + [None] * max(0, len(starts) - len(values or []))
    rows = [(num(t), num(b), num(k), num(d))
            for t, b, k, d in zip(starts, tl.get("batch") or [], pad(tl.get("kv_used")), pad(tl.get("duration")))]
    return [(t, b, k, d) for t, b, k, d in rows if t is not None and b is not None]


def chart_serve_timeline(rep):
    need_serve(rep)
    chosen = list(enumerate(rep.serve))
    if rep.step_name:
        chosen = [(i, s) for i, s in chosen if step_key(s.get("step", "")) == step_key(rep.step_name)]
    measured = any(executed(s) for _, s in chosen)
    steps = []  # per stack step, its panels: the predicted run, then the executed one
    for i, s in chosen:
        mine = [(i, s, run, rows) for run in runs_of(s) for rows in [timeline_rows(s, run)] if rows]
        if mine:
            steps.append(mine)
    if not steps:
        raise Skip("the report holds no engine steps over time")
    # Whole stack steps up to the cap, so an executed run stays under its prediction.
    panels = []
    for mine in steps:
        if panels and len(panels) + len(mine) > MAX_TIMELINE_PANELS:
            break
        panels += mine
    shown = len({i for i, _, _, _ in panels})
    n = len(panels)
    fig, axes = new_figure(9.0, 1.5 + 1.75 * n, rows=n, sharex=True)
    end = max(t + (d or 0) for _, _, _, rows in panels for t, _, _, d in rows)
    # One scale per quantity for all panels, so the steps compare at a glance; a pool the runs fill
    # is read against 100%, a small model's sliver of it at its own scale. An executed run's pool
    # is cut to what its requests can hold, so its KV has a scale of its own.
    batch_top = max(b for _, _, _, rows in panels for _, b, _, _ in rows) or 1
    kv_tops = {}
    for run in RUNS:
        top = max([(k or 0) * 100 for _, _, r, rows in panels if r == run for _, _, k, _ in rows] or [0])
        kv_tops[run] = 105 if top > 20 else (top * 1.2 if top > 0 else 1)
    sampled = []
    for ax, (i, s, run, rows) in zip(axes, panels):
        # Every engine step in the report: the batch drops to 0 between steps, where the engine
        # waits for arrivals. Every k-th of them: each sample holds until the next.
        every = (len(rows) >= (num(serve_part(s, "metrics", run=run).get("steps")) or 0) and
                 all(d is not None for _, _, _, d in rows))
        if not every:
            sampled.append(s.get("step", "?") + ("" if run == "predicted" else " (measured)"))
        ts, batch = [], []
        for j, (t, b, _, d) in enumerate(rows):
            ts.append(t)
            batch.append(b)
            stop = t + (d or 0)
            if every and (j + 1 == len(rows) or rows[j + 1][0] > stop):
                ts.append(stop)
                batch.append(0)
        if not every:
            ts.append(rows[-1][0] + (rows[-1][3] or 0))
            batch.append(batch[-1])
        side = "" if run == "predicted" else "measured-"
        color = PREDICTED if run == "predicted" else MEASURED
        ax.plot(ts, batch, drawstyle="steps-post", color=color, linewidth=0.9,
                gid="series-serve_timeline-batch-%s%d" % (side, i))
        ax.set_ylim(0, batch_top * 1.15)
        ax.set_ylabel("batch", color=color)
        kv_ax = ax.twinx()
        kv_ax.spines["right"].set_visible(True)
        kv_ax.grid(False)
        kv_t = [t for t, _, _, _ in rows] + [rows[-1][0] + (rows[-1][3] or 0)]
        kv = [(k or 0) * 100 for _, _, k, _ in rows]
        kv_ax.plot(kv_t, kv + kv[-1:], drawstyle="steps-post", color=KV_COLOR, linewidth=0.9,
                   gid="series-serve_timeline-kv-%s%d" % (side, i))
        kv_ax.set_ylim(0, kv_tops[run])
        kv_ax.set_ylabel("KV used (%)", color=KV_COLOR)
        pool = s.get("pool") if run == "predicted" else serve_part(s, "pool", run=run)
        pool = pool if isinstance(pool, dict) else {}
        blocks, tokens = num(pool.get("blocks")), num(pool.get("block_tokens"))
        where = " — KV pool %s blocks of %d tokens" % (format(int(blocks), ","), tokens) if blocks and tokens else ""
        if measured:
            where = (" — predicted on %s" % s.get("hardware", "?") if run == "predicted" else
                     " — measured on %s" % serve_backend(rep.point)) + where
        ax.set_title("%s%s" % (s.get("step", "?"), where), loc="left", fontsize=9)
    axes[-1].set_xlim(0, end * 1.01 if end > 0 else 1)
    axes[-1].set_xlabel("time from the run's start (s)")
    if measured:
        note = ("batch: sequences in each engine step, 0 while the engine waits for arrivals (left; blue predicted, "
                "orange measured); KV cache used after each step was formed, % of the pool (green, right); under each "
                "executed step its measured run on the same time axis, its KV as % of its own pool (the predicted one "
                "cut to what the run's requests can hold)")
    else:
        note = ("batch: sequences in each engine step, 0 while the engine waits for arrivals (blue, left); KV cache "
                "used after each step was formed, % of the pool (green, right)")
    if len(sampled) == n:
        note += "; every k-th engine step of these long runs, each held until the next"
    elif sampled:
        note += "; %s: every k-th engine step of a long run, each held until the next" % ", ".join(sampled)
    if shown < len(steps):
        note += "\nthe first %d of %d steps; --step NAME draws another alone" % (shown, len(steps))
    finish(fig, "Serving engine over time — %s" % rep.label(), serve_line(rep) + "\n" + note)
    return fig


def engines_of(s, run="predicted"):
    """The metrics of each engine of a stack step's run (a service of several), [] for one."""
    engines = (s.get(run) or {}).get("replicas") if isinstance(s.get(run), dict) else None
    return [e if isinstance(e, dict) else {} for e in engines] if isinstance(engines, list) else []


def engine_names(s):
    """Each engine of a stack step's service, as the report numbers them: a replica's number, or
    a disaggregated service's role and number within its role."""
    engines = engines_of(s)
    seen = {}
    names = []
    for k, e in enumerate(engines):
        role = (e or {}).get("role") or "replica"
        seen[role] = seen.get(role, -1) + 1
        names.append("%s %d" % (role, seen[role] if role != "replica" else k))
    return names


def chart_serve_engines(rep):
    need_serve(rep)
    chosen = [(i, s) for i, s in enumerate(rep.serve) if len(engines_of(s)) > 1]
    if rep.step_name:
        chosen = [(i, s) for i, s in chosen if step_key(s.get("step", "")) == step_key(rep.step_name)]
    if not chosen:
        raise Skip("no stack step serves with several engines (replicas, or prefill and decode engines)")
    measured = any(executed(s) for _, s in chosen)
    runs = RUNS if measured else RUNS[:1]
    # The x axis: every engine of every chosen step, a gap between steps.
    xs, labels, rows = [], [], []
    for i, s in chosen:
        for k, name in enumerate(engine_names(s)):
            xs.append(len(xs) + (len({j for j, _ in chosen if j < i}) * 0.6))
            labels.append("%s\n%s" % (name, s.get("step", "?")) if k == 0 else name)
            rows.append((i, s, k))
    panels = (("requests", "requests served", None), ("output_throughput", "output tokens/s", None),
              ("ttft", "TTFT p50", "median"), ("tpot", "TPOT p50", "median"))
    fig, axes = new_figure(max(7.0, 1.0 + 0.9 * len(xs)), 9.0, rows=len(panels), sharex=True)
    width = 0.38 if measured else 0.6
    for ax, (key, title, stat) in zip(axes, panels):
        top = 0.0
        for r, run in enumerate(runs):
            values = []
            for i, s, k in rows:
                engines = engines_of(s, run)
                e = engines[k] if k < len(engines) else {}
                v = latency(e, key, stat) if stat else num(e.get(key))
                values.append(v or 0.0)
            top = max([top] + values)
            dx = (r - 0.5) * width if measured else 0.0
            bars(ax, [x + dx for x in xs], [0.0] * len(xs), values, width,
                 "series-serve_engines-%s%s" % (key, "" if run == "predicted" else "-measured"),
                 PREDICTED if run == "predicted" else MEASURED)
            for x, v in zip(xs, values):
                if v:
                    text = fmt_time(v) if stat else ("%d" % v if key == "requests" else "%.0f" % v)
                    ax.annotate(text, (x + dx, v), textcoords="offset points", xytext=(0, 2), ha="center",
                                fontsize=7, bbox=LABEL_BOX)
        if stat and top:
            scale, unit = time_unit(top)
            ax.set_ylim(0, top * 1.25)
            ticks = ax.get_yticks()
            ax.set_yticks(ticks)
            ax.set_yticklabels(["%g" % (t / scale) for t in ticks])
            ax.set_ylim(0, top * 1.25)
            ax.set_ylabel("%s (%s)" % (title, unit))
        else:
            ax.set_ylim(0, (top or 1) * 1.25)
            ax.set_ylabel(title)
    axes[-1].set_xticks(xs)
    axes[-1].set_xticklabels(labels, fontsize=8)
    axes[-1].set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    for ax in axes:
        ax.grid(axis="x", visible=False)
    handles = [proxy(PREDICTED, "predicted")] + ([proxy(MEASURED, "measured on %s" % serve_backend(rep.point))]
                                                  if measured else [])
    axes[0].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    note = ("each engine of a service with several: replicas behind the router, or a disaggregated service's "
            "prefill and decode engines (a prefill engine's requests end at their first token, so it has no TPOT)")
    if measured:
        note += "; each replica or engine measured on a rank of its own"
    finish(fig, "Serving engines — %s" % rep.label(), serve_line(rep) + "\n" + note)
    return fig


def chart_serve_kv_transfer(rep):
    need_serve(rep)
    chosen = [(i, s) for i, s in enumerate(rep.serve) if isinstance(s.get("disaggregated"), dict)]
    if rep.step_name:
        chosen = [(i, s) for i, s in chosen if step_key(s.get("step", "")) == step_key(rep.step_name)]
    if not chosen:
        raise Skip("no stack step disaggregates prefill and decode")
    measured = any(executed(s) for _, s in chosen)
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8.0, 4.8))
    drawn = False
    for i, s in chosen:
        for run in runs_of(s):
            times = sorted(v for v in (num(x) for x in serve_part(s, "requests", run=run).get("kv_transfer_s") or [])
                           if v is not None and v >= 0)
            if not times:
                continue
            drawn = True
            n = len(times)
            d = s["disaggregated"]
            label = "%s (%s, %s)" % (s.get("step", "?"), d.get("link", "?"), d.get("kv_transfer", "?"))
            ax.step([v * 1e3 for v in times], [(j + 1) / n for j in range(n)], where="post", color=step_color(i),
                    linewidth=1.4, label=label if run == "predicted" else None,
                    gid="series-serve_kv_transfer-%s%d" % ("" if run == "predicted" else "measured-", i),
                    **run_line(run, measured))
    if not drawn:
        raise Skip("no request's KV was transferred")
    for q, text in ((0.5, "p50"), (0.99, "p99")):
        ax.axhline(q, color="#999999", linewidth=0.7, linestyle=":")
        ax.text(0.0, q, " " + text, transform=ax.get_yaxis_transform(), fontsize=7, color="#777777", va="bottom")
    ax.set_xscale("log")
    plain_log(ax, "x")
    ax.set_xlabel("a prompt's KV transfer, prefill engine to decode engine (ms, log)")
    ax.set_ylabel("fraction of transferred prompts")
    ax.set_ylim(0, 1.03)
    handles, _ = ax.get_legend_handles_labels()
    if measured:
        handles += run_handles(serve_backend(rep.point))
    ax.legend(handles=handles, loc="lower right", title="step (link, when sent)", title_fontsize=8)
    note = ("predicted: the prompt's KV bytes (one GPU's share) over the link, the whole transfer (the part that "
            "waits after the prefill is in the report)")
    if measured:
        note += ("; measured: the prompt's KV pages gathered, sent from the prefill rank to the decode rank and "
                 "written into its pool, to the decode rank's answer; dashed: predicted, solid: measured")
    finish(fig, "KV transfers — %s" % rep.label(), serve_line(rep) + "\n" + note)
    return fig


def chart_serve_speculative(rep):
    """Speculative decoding: the tokens a verify pass yielded against Leviathan et al.'s
    expectation, and each step's TPOT p50 beside the plain steps', predicted and measured."""
    need_serve(rep)
    # A step speculates when it says so (its drafts and acceptance) or its run verified drafts
    # (reports written before the step said so).
    spec = [(i, s) for i, s in enumerate(rep.serve)
            if isinstance(s.get("speculative"), dict) or serve_part(s, "metrics", "speculative")]
    if not spec:
        raise Skip("no stack step decodes speculatively")
    names = [s.get("step", "?") for s in rep.serve]
    measured = any(executed(s) for s in rep.serve)
    fig, (top, low) = new_figure(8.0, 7.0, rows=2, sharex=True)
    width = 0.36 if measured else 0.6
    expected_drawn = False
    for i, s in spec:
        d = s.get("speculative") if isinstance(s.get("speculative"), dict) else {}
        for j, run in enumerate(runs_of(s)):
            sp = serve_part(s, "metrics", "speculative", run=run)
            v = num(sp.get("tokens_per_verify"))
            if v is None:
                continue
            x = i + ((j - 0.5) * width if measured else 0.0)
            bars(top, [x], [0], [v], width, "series-serve_speculative-tokens-%s%d" % ("" if run == "predicted" else
                                                                                      "measured-", i),
                 step_color(i), hatch="///" if run == "executed" else None)
            top.annotate("%.2f" % v, (x, v), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7)
        e = num(d.get("expected_tokens_per_verify"))
        if e is not None:
            expected_drawn = True
            top.scatter([i], [e], marker="_", s=900, linewidths=2.0, color="#222222", zorder=3,
                        gid="series-serve_speculative-expected-%d" % i)
            top.annotate("k = %s, α = %s" % (d.get("drafts", "?"), d.get("acceptance", "?")), (i, e),
                         textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7, color="#222222")
    top.set_ylim(0, max([num((s.get("speculative") or {}).get("drafts")) or
                         num(serve_part(s, "metrics", "speculative").get("tokens_per_verify")) or 1
                         for _, s in spec]) + 1.5)
    top.set_ylabel("tokens per verify pass")
    step_axis(top, names)
    tpots = {run: [latency(serve_part(s, "metrics", run=run), "tpot", "median") for s in rep.serve]
             for run in (RUNS if measured else RUNS[:1])}
    values = [v for vs in tpots.values() for v in vs if v]
    if not values:
        raise Skip("no TPOT: no step served a request of several output tokens")
    scale, unit = time_unit(max(values))
    for run, vs in tpots.items():
        pts = [(i, v) for i, v in enumerate(vs) if v]
        low.plot([x for x, _ in pts], [v / scale for _, v in pts], marker="o", color=P50, linewidth=1.2,
                 gid="series-serve_speculative-tpot%s" % ("" if run == "predicted" else "-measured"),
                 **run_line(run, measured))
        for x, v in pts:
            low.annotate(fmt_time(v), (x, v / scale), textcoords="offset points",
                         xytext=(0, -11 if run == "predicted" else 5), ha="center", fontsize=7, color=P50,
                         bbox=LABEL_BOX)
    low.set_ylim(0, max(values) / scale * 1.25)
    low.set_ylabel("TPOT p50 (%s)" % unit)
    step_axis(low, names)
    handles = [proxy("#222222", "expected, (1 − α^(k+1)) / (1 − α)", marker="_")] if expected_drawn else []
    note = ("top: the tokens a verify pass yielded (its accepted drafts and the next token), the run's mean, against "
            "Leviathan et al.'s expectation (drafts near a request's end are fewer, so the run's is lower); "
            "below: TPOT p50 of every step, the plain ones beside")
    if measured:
        handles.append(proxy("#bbbbbb", "measured", hatch="///"))
        handles += run_handles(serve_backend(rep.point), "o")
        note += "; the executed engine draws the predicted run's accepted lengths, so its tokens per verify match"
    top.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    finish(fig, "Speculative decoding — %s" % rep.label(), serve_line(rep) + "\n" + note)
    return fig


def chart_serve_step_error(rep):
    need_serve(rep)
    chosen = list(enumerate(rep.serve))
    if rep.step_name:
        chosen = [(i, s) for i, s in chosen if step_key(s.get("step", "")) == step_key(rep.step_name)]
    panels = []
    for i, s in chosen:
        if not executed(s):
            continue
        tl = serve_part(s, "timeline", run="executed")
        # The wall time of each step (graph built, inputs written, run) against the cost model's
        # price of the same batch; a step of no measurable time has no place on log axes.
        pts = {"decode": [], "prefill": []}
        for wall, price, prefill in zip(tl.get("duration") or [], tl.get("predicted") or [],
                                        tl.get("prefill_tokens") or []):
            wall, price = num(wall), num(price)
            if wall and price and wall > 0 and price > 0:
                pts["prefill" if (num(prefill) or 0) > 0 else "decode"].append((wall * 1e3, price * 1e3))
        if pts["decode"] or pts["prefill"]:
            panels.append((i, s, pts))
    if not panels:
        what = "step %s was not executed" % rep.step_name if rep.step_name else "no stack step was executed"
        why = [(s.get("step", "?"), s.get("not_executed")) for _, s in chosen if s.get("not_executed")]
        if why:
            raise Skip("%s (%s: %s)" % ((what,) + why[0]))
        raise Skip("%s (a run on a backend executes them: --backend cpu or cuda)" % what)
    import matplotlib.pyplot as plt
    import numpy as np
    cols = min(len(panels), MAX_ERROR_COLUMNS)
    rows = (len(panels) + cols - 1) // cols
    # The same limits on every panel, set on each: shared axes would not keep them square.
    fig, grid = plt.subplots(rows, cols, figsize=(0.8 + 4.2 * cols, 1.8 + 4.2 * rows), squeeze=False)
    flat = [ax for row in grid for ax in row]
    every = [v for _, _, pts in panels for kind in pts.values() for p in kind for v in p]
    lo, hi = min(every) / 1.5, max(every) * 1.5
    line = np.logspace(math.log10(lo), math.log10(hi), 50)
    sampled = []
    for ax, (i, s, pts) in zip(flat, panels):
        ax.fill_between(line, line * 0.75, line * 1.25, color="#DDDDDD", alpha=0.6, linewidth=0, gid="band-25-%d" % i)
        ax.fill_between(line, line * 0.9, line * 1.1, color="#BBBBBB", alpha=0.6, linewidth=0, gid="band-10-%d" % i)
        ax.plot(line, line, color="#555555", linewidth=0.8, gid="identity-%d" % i)
        figures = serve_part(s, "engine_steps", run="executed")
        for kind, text, color in (("decode", "decode only", DECODE_COLOR), ("prefill", "with prefill", PREFILL_COLOR)):
            mine = pts[kind]
            if not mine:
                continue
            f = figures.get(kind) if isinstance(figures.get(kind), dict) else {}
            count, error = num(f.get("count")), num(f.get("error_median"))
            label = "%s: %d step%s" % (text, count or len(mine), "" if (count or len(mine)) == 1 else "s")
            if error is not None:
                label += ", median error %+.0f%%" % (error * 100)
            ax.scatter([m for m, _ in mine], [p for _, p in mine], s=12, alpha=0.7, color=color, label=label,
                       gid="series-serve_step_error-%s-%d" % (kind, i), zorder=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        plain_log(ax, "x")
        plain_log(ax)
        total = num(serve_part(s, "metrics", run="executed").get("steps"))
        drawn = len(pts["decode"]) + len(pts["prefill"])
        if total and drawn < total:
            sampled.append(s.get("step", "?"))
        host = num((figures.get("all") or {}).get("host_share")) if isinstance(figures.get("all"), dict) else None
        title = s.get("step", "?")
        if host is not None:
            title += " — host %.0f%% of the wall time" % (host * 100)
        ax.set_title(title, loc="left", fontsize=9)
        ax.legend(loc="upper left")
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    for k, ax in enumerate(flat[:len(panels)]):
        if k + cols >= len(panels):  # no panel under it
            ax.set_xlabel("measured wall time (ms, log)")
        if k % cols == 0:
            ax.set_ylabel("cost model's price (ms, log)")
    note = ("each engine step of the executed run: its wall time (the step's graph built, its inputs written, "
            "the step run) against the cost model's price of the same batch on %s; above the line the model prices "
            "the step slower than it ran, below faster; the bands are ±10%% and ±25%%; median error: "
            "(price − wall) ÷ wall over every engine step" % ", ".join(sorted({s.get("hardware", "?") for _, s, _ in panels})))
    if sampled:
        note += "; %s: every k-th engine step of a long run" % ", ".join(sampled)
    finish(fig, "Engine steps, predicted vs measured — %s" % rep.label(), serve_line(rep) + "\n" + note)
    return fig


def chart_serve_load(rep):
    points = [r for r in rep.results if serve_steps(r)]
    key = None
    for k in LOAD_KEYS:
        if len({(r.get("sweep") or {}).get(k) for r in points} - {None}) >= 2:
            key = k
            break
    if key is None:
        raise Skip("no sweep over the load of a serving scenario (sweep = {rate = {...}} or {users = {...}})")
    series = {}
    for r in points:
        sweep = r.get("sweep") or {}
        try:
            x = float(sweep.get(key))  # sweep values are strings in the report
        except (TypeError, ValueError):
            continue
        others = "".join(" %s=%s" % kv for kv in sorted(sweep.items()) if kv[0] != key)
        for i, s in enumerate(serve_steps(r)):
            entry = series.setdefault(s.get("step", "?") + others, {"index": i, "runs": {}})
            for run in runs_of(s):
                m = serve_part(s, "metrics", run=run)
                entry["runs"].setdefault(run, []).append(
                    {"x": x, "ttft50": latency(m, "ttft", "median"), "ttft99": latency(m, "ttft", "p99"),
                     "tpot50": latency(m, "tpot", "median"), "tpot99": latency(m, "tpot", "p99"),
                     "rps": num(m.get("request_throughput"))})
    # A run is a line where it has several loads; a step measured at one load only is predicted only.
    for v in series.values():
        v["runs"] = {run: pts for run, pts in v["runs"].items() if len({p["x"] for p in pts}) >= 2}
    series = {k: v for k, v in series.items() if "predicted" in v["runs"]}
    if not series:
        raise Skip("no stack step was predicted at several %s values" % key)
    measured = any("executed" in v["runs"] for v in series.values())
    # Colours by step when the steps are the only series, else by series.
    by_step = len(series) == len({v["index"] for v in series.values()})
    fig, axes = new_figure(8.0, 8.4, rows=3, sharex=True, heights=[3, 3, 2])
    xs_all = sorted({p["x"] for v in series.values() for p in v["runs"]["predicted"]})
    for n, (label, v) in enumerate(series.items()):
        color = step_color(v["index"] if by_step else n)
        for run, pts in v["runs"].items():
            pts = sorted(pts, key=lambda p: p["x"])
            side = "" if run == "predicted" else "-measured"
            for ax, what in ((axes[0], "ttft"), (axes[1], "tpot")):
                for stat, style, marker in (("50", "-", "o"), ("99", "--", "s")):
                    got = [p for p in pts if p[what + stat]]
                    if got:
                        ax.plot([p["x"] for p in got], [p[what + stat] * 1e3 for p in got], marker=marker,
                                markersize=4, color=color, linewidth=1.3,
                                label=label if stat == "50" and what == "ttft" and run == "predicted" else None,
                                gid="series-serve_load-%s-p%s%s-%d" % (what, stat, side, n),
                                **dict({"linestyle": style}, **run_line(run, measured)))
            got = [p for p in pts if p["rps"]]
            if got:
                axes[2].plot([p["x"] for p in got], [p["rps"] for p in got], marker="o", markersize=4, color=color,
                             linewidth=1.3, gid="series-serve_load-throughput%s-%d" % (side, n),
                             **run_line(run, measured))
    for ax, what in ((axes[0], "TTFT"), (axes[1], "TPOT")):
        ax.set_yscale("log")
        plain_log(ax)
        ax.set_ylabel("%s (ms, log)" % what)
    if key == "rate":
        axes[2].plot(xs_all, xs_all, ":", color="#333333", linewidth=0.8, gid="offered")
        axes[2].set_xlabel("offered request rate (requests/s)")
    else:
        axes[2].set_xlabel("concurrent users (closed loop)")
    axes[2].set_ylabel("served (requests/s)")
    axes[2].set_ylim(bottom=0)
    if xs_all[0] > 0 and xs_all[-1] / xs_all[0] >= 10:
        axes[2].set_xscale("log")
    axes[2].set_xticks(xs_all)
    axes[2].set_xticklabels(["%g" % x for x in xs_all])
    from matplotlib.lines import Line2D
    if measured:
        # Solid colour per step: the dashes say predicted here, so p50 and p99 are told by marker.
        handles = [Line2D([], [], color=step_color(v["index"] if by_step else n), linewidth=1.3, label=label)
                   for n, (label, v) in enumerate(series.items())]
        handles += [Line2D([], [], color="#333333", linestyle="none", marker="o", markersize=4, label="p50"),
                    Line2D([], [], color="#333333", linestyle="none", marker="s", markersize=4, label="p99")]
        handles += run_handles(serve_backend(points[0]), "o")
    else:
        handles, _ = axes[0].get_legend_handles_labels()
        handles += [Line2D([], [], color="#333333", linestyle="-", marker="o", markersize=4, label="p50"),
                    Line2D([], [], color="#333333", linestyle="--", marker="s", markersize=4, label="p99")]
    if key == "rate":
        handles.append(_dotted("served = offered"))
    axes[0].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    point = rep.results[0]
    note = ("p50 and p99 TTFT and TPOT, and the requests served per second, against the %s swept; one line per "
            "stack step" % ("offered request rate" if key == "rate" else "concurrent users"))
    if measured:
        note += ("; predicted dashed and hollow, measured on %s solid and filled (p50 circles, p99 squares)" %
                 serve_backend(points[0]))
    finish(fig, "Latency vs load — %s" % point.get("scenario", "?"),
           note + "\nwhere latency turns sharply up and the served rate stops following the offered one, the "
           "engine is saturated: its capacity is the load just before that knee")
    return fig


# ----------------------------------------------------------------------------------------------
# A validation report

def chart_validation(doc):
    ops = [o for o in doc.get("ops", []) if isinstance(o, dict)]
    pts = [(num(o.get("measured_s")), num(o.get("predicted_s")), o.get("class", "?")) for o in ops]
    pts = [(m, p, c) for m, p, c in pts if m and p and m > 0 and p > 0]
    if not pts:
        raise Skip("no op was both predicted and measured")
    import numpy as np
    fig, (ax,) = new_figure(7.0, 6.4)
    lo = min(min(m, p) for m, p, _ in pts) / 1.5
    hi = max(max(m, p) for m, p, _ in pts) * 1.5
    line = np.logspace(math.log10(lo), math.log10(hi), 50)
    ax.fill_between(line, line * 0.75, line * 1.25, color="#DDDDDD", alpha=0.6, linewidth=0, gid="band-25")
    ax.fill_between(line, line * 0.9, line * 1.1, color="#BBBBBB", alpha=0.6, linewidth=0, gid="band-10")
    ax.plot(line, line, color="#555555", linewidth=0.8, gid="identity")
    classes = [c for c in CLASS_ORDER if any(k == c for _, _, k in pts)]
    classes += sorted({k for _, _, k in pts} - set(CLASS_ORDER))
    for i, c in enumerate(classes):
        mine = [(m, p) for m, p, k in pts if k == c]
        ax.scatter([m for m, _ in mine], [p for _, p in mine], s=14, alpha=0.75,
                   color=CLASS_COLORS.get(c, "C%d" % (i % 10)), label="%s (%d)" % (c, len(mine)),
                   gid="series-validation-%s" % c, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("measured op time (s)")
    ax.set_ylabel("predicted op time (s)")
    errors = sorted(abs(p - m) / m for m, p, _ in pts)
    within = lambda e: sum(1 for x in errors if x <= e) * 100.0 / len(errors)
    handles, _ = ax.get_legend_handles_labels()
    handles += [proxy("#BBBBBB", "±10%%: %.0f%% of ops" % within(0.10)),
                proxy("#DDDDDD", "±25%%: %.0f%% of ops" % within(0.25))]
    ax.legend(handles=handles, loc="upper left")
    v = doc.get("validate") or {}
    prof = (v.get("profile") or {}).get("name", "?")
    median = errors[len(errors) // 2] if len(errors) % 2 else (errors[len(errors) // 2 - 1] + errors[len(errors) // 2]) / 2
    finish(fig, "Predicted vs measured per op — %s" % v.get("device", "?"),
          "%s backend, profile %s; %d ops, median |error| %.1f%%; the bands are ±10%% and ±25%%" %
          (v.get("backend", "?"), prof, len(pts), median * 100))
    return fig


# ----------------------------------------------------------------------------------------------
# A trace (perfsim run --trace t.json): one step's processes as lanes of spans

# Each span coloured by the part of the step it belongs to, told from its op class (the
# category; a rank's spans take the class of the op of the same name in the step's other
# processes) and its name.
PHASES = [
    ("forward", "forward", "#4C72B0"),
    ("backward", "backward (dgrad, wgrad, grad sums)", "#DD8452"),
    ("optimizer", "optimizer", "#55A868"),
    ("pipeline", "pipeline send/receive (waits too)", "#C44E52"),
    ("collective", "collective (all-reduce, ...)", "#8172B3"),
    ("host", "host issue", "#8C8C8C"),
    ("step", "step", "#BBBBBB"),
    ("engine", "serving engine step", "#937860"),
]
PHASE_COLORS = {k: c for k, _, c in PHASES}
COLLECTIVE_WORDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


def phase_of(name, cls):
    base = name.split("/", 1)[1] if "/" in name and name.split("/", 1)[0].startswith("mb") else name
    if cls in ("step", "engine"):
        return cls
    if cls == "host":
        return "host"
    if "pipeline." in base:
        return "pipeline"
    if cls == "communication" or any(w in base for w in COLLECTIVE_WORDS):
        return "collective"
    if cls == "optimizer" or base.endswith((".adamw", ".adam", ".sgd")):
        return "optimizer"
    if base.endswith(".bwd") or "grad" in base:
        return "backward"
    return "forward"


def lighter(color, amount=0.45):
    from matplotlib.colors import to_rgb
    return tuple(c + (1 - c) * amount for c in to_rgb(color))


def short(text, width):
    return text if len(text) <= width else text[:width - 1] + "…"


def slug(text):
    out = "".join(ch if ch.isalnum() else "-" for ch in text.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-") or "x"


class Trace:
    """The processes of a trace, grouped per step: a `predicted · ...` process opens a group, the
    `measured · ...` processes after it (the step's measured timeline, then one per rank) join it."""

    def __init__(self, doc, shown):
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            raise Failure("%s is not a trace: 'traceEvents' is not a list" % shown)
        self.names, self.order, self.tracks, self.spans = {}, {}, {}, {}
        for e in events:
            if not isinstance(e, dict) or "pid" not in e:
                continue
            pid, ph = e.get("pid"), e.get("ph")
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            if ph == "M":
                if e.get("name") == "process_name":
                    self.names[pid] = str(args.get("name", ""))
                elif e.get("name") == "process_sort_index" and num(args.get("sort_index")) is not None:
                    self.order[pid] = num(args["sort_index"])
                elif e.get("name") == "thread_name":
                    self.tracks.setdefault(pid, {})[e.get("tid")] = str(args.get("name", ""))
            elif ph == "X" and num(e.get("ts")) is not None and num(e.get("dur")) is not None:
                self.spans.setdefault(pid, []).append(e)
        pids = sorted(set(self.names) | set(self.spans), key=lambda p: (self.order.get(p, 0), str(p)))
        self.groups = []
        for pid in pids:
            name = self.names.get(pid, "process %s" % pid)
            step = next((e.get("name") for e in self.spans.get(pid, []) if e.get("cat") == "step"), None)
            if step is None:
                step = name.split(" / ", 1)[1].split(" (", 1)[0] if " / " in name else name
            if name.startswith("predicted · ") or not self.groups or self.groups[-1]["step"] != step:
                self.groups.append({"step": step, "pids": [], "label": ""})
            g = self.groups[-1]
            g["pids"].append(pid)
            if not g["label"]:
                head = name.split(" · ", 1)[1] if " · " in name else name
                g["label"] = head.split(" · rank ", 1)[0].rsplit(" (", 1)[0]
        if not any(self.spans.values()):
            raise Failure("%s is a trace without spans" % shown)

    def is_rank(self, pid):
        return " · rank " in self.names.get(pid, "")

    def pick(self, name):
        if name:
            for g in self.groups:
                if step_key(g["step"]) == step_key(name):
                    return g
            raise Failure("--step %s: the trace holds no such step (the steps: %s)" %
                          (name, ", ".join(g["step"] for g in self.groups)))
        for g in self.groups:
            if any(self.is_rank(p) for p in g["pids"]):
                return g
        return self.groups[0]

    def process_label(self, pid):
        """`predicted (HW)`, `measured (BACKEND, DEVICE)`, `rank R (stage S, HOST)`."""
        name = self.names.get(pid, "process %s" % pid)
        if " · rank " in name:
            return "rank " + name.split(" · rank ", 1)[1]
        side = name.split(" · ", 1)[0]
        where = name.rsplit(" (", 1)[1].rstrip(")") if " (" in name else ""
        return "%s (%s)" % (side, where) if where else side

    def process_slug(self, pid):
        name = self.names.get(pid, "")
        if " · rank " in name:
            return "rank" + slug(name.split(" · rank ", 1)[1].split(" ", 1)[0])
        if name.startswith("serve · ") and "(measured, " in name:  # beside its step's predicted process
            return "serve-measured"
        return slug(name.split(" · ", 1)[0]) if " · " in name else "p%s" % slug(str(pid))


def track_label(name):
    if name.startswith("pipeline (") and name.endswith(")"):
        name = "pipeline: " + name[len("pipeline ("):-1]
    return short(name, 34)


def chart_timeline(trace, g):
    classes = {}
    for pid in g["pids"]:
        if not trace.is_rank(pid):
            for e in trace.spans.get(pid, []):
                classes.setdefault(e.get("name"), e.get("cat"))
    rows = []  # (kind, pid, tid, label); kind "process" for a group's header row
    for pid in g["pids"]:
        spans = trace.spans.get(pid, [])
        tids = sorted({e.get("tid") for e in spans}, key=lambda t: (t == 99, t if isinstance(t, (int, float)) else 0))
        if not tids:
            continue
        rows.append(("process", pid, None, trace.process_label(pid)))
        for tid in tids:
            rows.append(("lane", pid, tid, track_label(trace.tracks.get(pid, {}).get(tid, "track %s" % tid))))
    end = max(num(e["ts"]) + num(e["dur"]) for pid in g["pids"] for e in trace.spans.get(pid, []))
    scale, unit = time_unit(max(end, 1e-3) * 1e-6)
    scale *= 1e6  # trace times are microseconds

    from matplotlib.collections import PolyCollection
    height = 1.6 + 0.24 * len(rows)
    fig, (ax,) = new_figure(10.0, max(3.6, height))
    seen_phases, ticks, labels, slugs = set(), [], [], set()
    min_width = end / scale / 1000
    odd_micro = False
    y = 0.0
    for kind, pid, tid, label in rows:
        y -= 1.0
        if kind == "process":
            ax.text(0.0, y + 0.15, label, transform=ax.get_yaxis_transform(), ha="left", va="center",
                    fontsize=8, fontweight="bold", color="#333333")
            ax.axhline(y + 0.6, color="#999999", linewidth=0.6)
            continue
        verts, colors = [], []
        for e in trace.spans.get(pid, []):
            if e.get("tid") != tid:
                continue
            name = str(e.get("name", ""))
            cls = e.get("cat")
            if cls == "rank":
                base = name.split("/", 1)[1] if "/" in name else name
                cls = classes.get(base, "")
            phase = phase_of(name, cls)
            seen_phases.add(phase)
            x0 = num(e["ts"]) / scale
            # At least a thousandth of the axis: a span far shorter than a pixel still shows.
            x1 = x0 + max(num(e["dur"]) / scale, min_width)
            verts.append([(x0, y - 0.38), (x0, y + 0.38), (x1, y + 0.38), (x1, y - 0.38)])
            color = PHASE_COLORS[phase] if not (phase == "step" and name == "host overhead") else "#777777"
            micro = (e.get("args") or {}).get("micro_batch") if isinstance(e.get("args"), dict) else None
            if isinstance(micro, int) and micro % 2 == 1:
                color = lighter(color)
                odd_micro = True
            colors.append(color)
        gid = "series-timeline-%s-%s" % (trace.process_slug(pid), slug(trace.tracks.get(pid, {}).get(tid, str(tid))))
        while gid in slugs:
            gid += "-%s" % slug(str(tid))
        slugs.add(gid)
        # Edges in the face colour: a span far shorter than a pixel still shows.
        ax.add_collection(PolyCollection(verts, facecolors=colors, linewidths=0, gid=gid))
        ticks.append(y)
        labels.append(label)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(y - 0.7, 0.0)
    ax.set_xlim(0, end / scale * 1.01)
    ax.grid(axis="y", visible=False)
    ax.tick_params(axis="y", length=0)
    serving = all(trace.names.get(p, "").startswith("serve · ") for p in g["pids"])
    ax.set_xlabel("time from the %s's start (%s)" % ("run" if serving else "step", unit))
    handles = [proxy(PHASE_COLORS[k], text) for k, text, _ in PHASES if k in seen_phases]
    if odd_micro:
        handles.append(proxy(lighter("#777777"), "lighter: odd micro-batches"))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0, 1.0, 0.05), mode="expand",
              ncol=min(4, len(handles)), borderaxespad=0.2)
    others = [x["step"] for x in trace.groups if x is not g]
    if serving:
        measured = any("(measured, " in trace.names.get(p, "") for p in g["pids"])
        note = ("a span per step of the serving engine's predicted run%s; the trace's counters and requests show in "
                "Perfetto (ui.perfetto.dev)" % (" and of the run the backend executed" if measured else ""))
    else:
        note = ("colour: the part of the step each op belongs to; predicted: the cost model's stream timeline; "
                "measured: the stream timeline of the measured per-op medians")
    if any(trace.is_rank(p) for p in g["pids"]):
        note += "; rank R: each op where it ran in the rank's run of median length, waits for other ranks included"
    if others:
        note += "\nthe trace's other steps: %s (--step NAME)" % ", ".join(others)
    finish(fig, "Timeline — %s" % g["label"], note)
    return fig


# ----------------------------------------------------------------------------------------------

RUN_CHARTS = [
    ("roofline", chart_roofline),
    ("stack", chart_stack),
    ("memory", chart_memory),
    ("op_classes", chart_op_classes),
    ("scaling", chart_scaling),
    ("ranks", chart_ranks),
]

# Drawn for reports of serving scenarios only.
SERVE_CHARTS = [
    ("serve_latency_cdf", chart_serve_latency_cdf),
    ("serve_percentiles", chart_serve_percentiles),
    ("serve_timeline", chart_serve_timeline),
    ("serve_load", chart_serve_load),
    ("serve_step_error", chart_serve_step_error),
    ("serve_engines", chart_serve_engines),
    ("serve_kv_transfer", chart_serve_kv_transfer),
    ("serve_speculative", chart_serve_speculative),
]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="perfsim plot", add_help=False)
    ap.add_argument("report")
    ap.add_argument("dir")
    ap.add_argument("--step", default="")
    ap.add_argument("--point", type=int, default=1)
    ap.add_argument("--dpi", type=int, default=100)
    ap.add_argument("--label", default="")
    ap.add_argument("--trace", default="")
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("--check", action="store_true")
    return ap.parse_args(argv)


def say(args, text):
    if not args.quiet:
        sys.stderr.write("perfsim: plot: %s\n" % text)
        sys.stderr.flush()


def draw(args):
    shown = args.label or args.report
    try:
        with open(args.report, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise Failure("cannot read %s: %s" % (shown, e.strerror))
    except ValueError as e:
        raise Failure("%s is not a perfsim JSON report: %s" % (shown, e))
    if not isinstance(doc, dict):
        raise Failure("%s is not a perfsim JSON report (write one with perfsim run -o r.json)" % shown)

    def no_trace():
        raise Skip("it needs a trace, not a report: perfsim run SCENARIO --trace t.json, then perfsim plot t.json DIR")

    def trace_timeline():
        # run --trace FILE --plots DIR: the timeline of the trace written beside the report.
        try:
            with open(args.trace, encoding="utf-8") as f:
                trace = Trace(json.load(f), args.trace)
        except (OSError, ValueError) as e:
            raise Skip("cannot read the trace %s: %s" % (args.trace, e))
        group = trace.pick(args.step)
        if len(trace.groups) > 1:
            say(args, "the timeline shows step %s of %d; perfsim plot %s DIR --step NAME draws another" %
                (group["step"], len(trace.groups), args.trace))
        return chart_timeline(trace, group)

    timeline = trace_timeline if args.trace else no_trace

    charts = []
    if "traceEvents" in doc:
        if args.point != 1:
            raise Failure("--point picks a sweep point of a run report; %s is a trace (--step NAME picks its step)" %
                          shown)
        trace = Trace(doc, shown)
        group = trace.pick(args.step)
        if len(trace.groups) > 1:
            say(args, "the timeline shows step %s of %d; --step NAME picks another (%s)" %
                (group["step"], len(trace.groups), ", ".join(g["step"] for g in trace.groups if g is not group)))
        charts = [("timeline", lambda: chart_timeline(trace, group))]
    elif "results" in doc:
        rep = RunReport(doc, args, shown)
        if len(rep.results) > 1:
            say(args, "%d sweep points: the per-step charts show point %d (%s); --point N picks another" %
                (len(rep.results), args.point, rep.label()))
        # A serving scenario's points hold engine runs, not model steps: the charts of each kind
        # the report holds.
        kinds = (RUN_CHARTS if rep.steps else []) + (SERVE_CHARTS if any(serve_steps(r) for r in rep.results) else [])
        charts = [(name, (lambda fn: lambda: fn(rep))(fn)) for name, fn in kinds]
        charts.append(("timeline", timeline))
    elif "validate" in doc and "ops" in doc:
        if args.step or args.point != 1:
            raise Failure("--step and --point pick from a run report; %s is a validation report" % shown)
        charts = [("validation", lambda: chart_validation(doc)), ("timeline", timeline)]
    elif "validate" in doc:
        raise Failure("%s compares several validation runs: chart one run's report "
                      "(perfsim validate --measurements FILE -o v.json)" % shown)
    else:
        raise Failure("%s is not a perfsim JSON report: it holds neither 'results' (perfsim run), 'validate' "
                      "(perfsim validate) nor 'traceEvents' (a trace, --trace FILE)" % shown)

    import matplotlib.pyplot as plt
    os.makedirs(args.dir, exist_ok=True)
    # Every chart goes to a scratch folder inside DIR first; only a complete set is moved in.
    scratch = tempfile.mkdtemp(prefix=".perfsim-plot-", dir=args.dir)
    try:
        written, skipped = [], []
        for name, make in charts:
            try:
                fig = make()
            except Skip as s:
                skipped.append((name, str(s)))
                continue
            fig.savefig(os.path.join(scratch, name + ".svg"), format="svg",
                        metadata={"Date": None, "Creator": "perfsim plot"})
            fig.savefig(os.path.join(scratch, name + ".png"), format="png", dpi=args.dpi,
                        metadata={"Software": "perfsim plot"})
            plt.close(fig)
            written.append(name)
        if not written:
            reasons = "; ".join("%s: %s" % kv for kv in skipped)
            raise Failure("%s holds no data any chart draws (%s)" % (shown, reasons))
        for name in written:
            for ext in (".svg", ".png"):
                os.replace(os.path.join(scratch, name + ext), os.path.join(args.dir, name + ext))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for name, reason in skipped:
        say(args, "skipped %s: %s" % (name, reason))
    say(args, "wrote %d chart%s to %s (%s), each as SVG and PNG" %
        (len(written), "" if len(written) == 1 else "s", args.dir, ", ".join(written)))


def main(argv):
    args = parse_args(argv)
    try:
        import matplotlib  # noqa: F401
        setup_matplotlib()
        import matplotlib.pyplot  # noqa: F401
    except ImportError:
        return EXIT_NO_MATPLOTLIB
    if args.check:
        return 0
    try:
        draw(args)
    except Failure as e:
        sys.stderr.write("perfsim: error: %s\n" % e)
        return 1
    except OSError as e:
        where = e.filename or args.dir
        sys.stderr.write("perfsim: error: cannot write charts to %s: %s\n" % (where, e.strerror or e))
        return 1
    except Exception as e:  # a report shaped as this script did not expect: still one line
        import traceback
        line = traceback.extract_tb(e.__traceback__)[-1].lineno
        sys.stderr.write("perfsim: error: charts of %s failed: %s: %s (perfsim_plot.py line %d)\n" %
                         (args.label or args.report, type(e).__name__, e, line))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
