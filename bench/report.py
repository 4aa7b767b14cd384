"""The report of bench/compare.py: the figures of a run (the median over
rounds of the per-run medians, their spread), the ratios and the targets,
written as a markdown report and a PNG plot of busbw against size.

compare.py runs the programs and collects their records into a Results; this
module only reads them, so a report can be written from any set of records.
"""

import math
import shlex
import statistics
import sys

# The libraries and collectives, shared with compare.py (which runs them) so
# that both agree on the names and on the order of the tables' columns.
ALL_COLLS = ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast",
             "reduce", "gather", "scatter", "sendrecv"]
COLL_LIBS = ["vigil", "vigil-tcp", "openmpi", "mpich", "gloo"]
BASELINE_LIBS = ["memcpy", "tcp"]
ALL_LIBS = COLL_LIBS + BASELINE_LIBS
PEERS = ["openmpi", "mpich", "gloo"]
MIB = 1 << 20


def fmt_size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


# ------------------------------------------------------------- results ---

class Results:
    def __init__(self):
        self.runs = {}        # (lib, coll, size) -> [record per round]
        self.raw = []         # every record, with round and command
        self.missing = {}     # lib -> reason
        self.failures = []    # (lib, band label, coll or None, rc, stderr tail)
        self.wrong = []       # (lib, coll, size, round, wrong)

    def add(self, lib, rec, size, rnd):
        rec = dict(rec, lib=lib)
        self.runs.setdefault((lib, rec["coll"], size), []).append(rec)
        self.raw.append(dict(rec, round=rnd, nominal_bytes=size))
        if rec.get("wrong", 0):
            self.wrong.append((lib, rec["coll"], size, rnd, rec["wrong"]))

    def value(self, lib, coll, size, key="busbw_gbs"):
        recs = self.runs.get((lib, coll, size))
        if not recs:
            return None
        return statistics.median(r[key] for r in recs)

    def spread(self, lib, coll, size, key="busbw_gbs"):
        recs = self.runs.get((lib, coll, size))
        if not recs:
            return None
        vals = [r[key] for r in recs]
        return min(vals), max(vals)


# -------------------------------------------------------------- report ---

def fmt_v(v):
    if v is None:
        return "–"
    return f"{v:.3g}" if v < 1000 else f"{v:.0f}"


def fmt_ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    r = a / b
    return f"{r:.2f}×" if r >= 0.1 else f"{r:.2g}×"


def pct(a, b):
    if a is None or not b:
        return "–"
    p = 100 * a / b
    return f"{p:.0f} %" if p >= 10 else f"{p:.2g} %"


def cell(results, lib, coll, size, key="busbw_gbs", rounds=1):
    v = results.value(lib, coll, size, key)
    if v is None:
        return "–"
    text = fmt_v(v)
    if rounds > 1:
        lo, hi = results.spread(lib, coll, size, key)
        text += f" ({fmt_v(lo)}–{fmt_v(hi)})"
    if any(r.get("wrong", 0) for r in results.runs[(lib, coll, size)]):
        text += " **WRONG**"
    return text


def evaluate_targets(results, sizes, colls):
    """Each target: (description, verdict, worst ratio text, details)."""
    big = [s for s in sizes if MIB <= s <= 64 * MIB]
    from_1m = [s for s in sizes if s >= MIB]
    small = min(sizes)
    rows = []

    def check(desc, pairs, threshold, higher_is_better=True):
        """pairs: [(label, numerator, denominator)]; ratio = num/den must be
        >= threshold."""
        ratios = []
        missing = []
        for label, num, den in pairs:
            if num is None or den is None or den == 0:
                missing.append(label)
            else:
                ratios.append((label, num / den))
        if not pairs:
            rows.append((desc, "N/A", "–", "no sizes in this sweep"))
            return
        if not ratios:
            rows.append((desc, "N/A", "–", "missing: " + ", ".join(missing)))
            return
        worst = min(ratios, key=lambda x: x[1])
        met = all(r >= threshold for _, r in ratios) and not missing
        verdict = "MET" if met else ("MISSED" if any(r < threshold for _, r in ratios) else "N/A")
        details = ", ".join(f"{lbl}: {r:.3g}" for lbl, r in ratios)
        if missing:
            details += "; missing: " + ", ".join(missing)
        rows.append((desc, verdict, f"{worst[1]:.3g} ({worst[0]})", details))

    v = results.value
    check("allreduce 1–64 MiB busbw ≥ 1.5× Open MPI",
          [(fmt_size(s), v("vigil", "allreduce", s), v("openmpi", "allreduce", s)) for s in big], 1.5)
    check("allreduce 1–64 MiB busbw ≥ 50 % of memcpy (one thread)",
          [(fmt_size(s), v("vigil", "allreduce", s), v("memcpy", "memcpy", s)) for s in big], 0.5)
    for coll in ("allgather", "reducescatter", "alltoall", "broadcast"):
        if coll not in colls:
            continue
        for peer, name in (("openmpi", "Open MPI"), ("mpich", "MPICH")):
            check(f"{coll} 1–64 MiB busbw ≥ {name}",
                  [(fmt_size(s), v("vigil", coll, s), v(peer, coll, s)) for s in big], 1.0)
    if "allreduce" in colls:
        # Latency: the ratio is Open MPI's time over vigil's (≥ 1 is met).
        check(f"allreduce {fmt_size(small)} latency ≤ Open MPI",
              [(fmt_size(small), v("openmpi", "allreduce", small, "time_us"),
                v("vigil", "allreduce", small, "time_us"))], 1.0)
    for coll in colls:
        # busbw ratio at every size (at the smallest sizes this is the latency ratio).
        check(f"{coll} ≥ 10× Gloo (busbw, every size)",
              [(fmt_size(s), v("vigil", coll, s), v("gloo", coll, s)) for s in sizes], 10.0)
    check("vigil-tcp allreduce ≥ 1.2× Gloo at ≥ 1 MiB",
          [(fmt_size(s), v("vigil-tcp", "allreduce", s), v("gloo", "allreduce", s)) for s in from_1m], 1.2)
    check("vigil-tcp allreduce busbw ≥ 70 % of full-duplex TCP per direction at ≥ 1 MiB",
          [(fmt_size(s), v("vigil-tcp", "allreduce", s), v("tcp", "stream", s)) for s in from_1m], 0.7)
    return rows


def write_report(path, png_name, args, sizes, bands, colls, libs, results, info, vers, started, finished,
                 load_before, load_after):
    R = args.rounds
    lines = []
    add = lines.append
    add(f"# vigil against Open MPI, MPICH and Gloo — {started:%Y-%m-%d}")
    add("")
    add("Command:")
    add("")
    add("```")
    add(" ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]))
    add("```")
    add("")
    add(f"Started {started:%Y-%m-%d %H:%M:%S}, finished {finished:%H:%M:%S} "
        f"({(finished - started).total_seconds() / 60:.1f} min). "
        f"Load average before: {load_before}; after: {load_after}.")
    add("")
    add("## Machine and versions")
    add("")
    add(f"- CPU: {info['cpu']}, {info['cpus']} CPUs, {info['mem_gib']} GiB memory")
    add(f"- OS: {info['os']}, {info['kernel']}; transparent huge pages: {info['thp']}")
    for k, val in vers.items():
        add(f"- {k}: {val}")
    add("")
    add("## Method")
    add("")
    add(f"{args.np} ranks on one host. The nccl-tests convention of shared/perf.md: bytes is the larger "
        "per-rank buffer; one sample is ITERS back-to-back calls after a barrier, its time the maximum over "
        "ranks / ITERS; each run reports the median of SAMPLES samples after WARMUP calls; results are "
        "checked afterwards on fresh inputs. busbw = bytes / time × (allreduce 2(n−1)/n; allgather, "
        "reducescatter, alltoall, gather, scatter (n−1)/n; broadcast, reduce, sendrecv 1).")
    add("")
    add(f"{R} round(s); in each, for each size band, every library in turn (order rotated each round). "
        f"A figure is the median over rounds of the per-run medians; in parentheses the lowest and highest "
        f"of the per-run medians. float32, sum. SAMPLES = {args.samples}.")
    add("")
    add("| sizes | ITERS | WARMUP |")
    add("|---|---|---|")
    for b in bands:
        add(f"| {fmt_size(b['sizes'][0])} … {fmt_size(b['sizes'][-1])} | {b['iters']} | {b['warmup']} |")
    add("")
    add("vigil: `vigil-run -n N vigil-perf` with VIGIL_SOCKET_IFNAME=lo (transport chosen by vigil); "
        "vigil-tcp: the same with VIGIL_TRANSPORT=tcp. Open MPI: `mpirun.openmpi --allow-run-as-root "
        "--oversubscribe` (defaults otherwise); MPICH: `mpiexec.mpich`; Gloo: its TCP transport on 127.0.0.1, "
        "options built once per size; memcpy: one thread; tcp: two processes over loopback.")
    add("")
    if results.missing:
        add("## Not measured")
        add("")
        for lib, why in results.missing.items():
            add(f"- **{lib}**: {why}")
        add("")
    if results.wrong:
        add("## Wrong results")
        add("")
        for lib, coll, size, rnd, n in results.wrong:
            add(f"- {lib} {coll} {fmt_size(size)} (round {rnd + 1}): {n} wrong elements")
        add("")
    if results.failures:
        add("## Failed runs")
        add("")
        for lib, label, what, rc, tail in results.failures:
            add(f"- {lib} {what} {label}: exit {rc}")
            if tail:
                add("")
                add("  ```")
                for t in tail.splitlines():
                    add("  " + t)
                add("  ```")
        add("")

    add("## Targets")
    add("")
    add("Ratios are vigil / peer (busbw; for latency, peer time / vigil time): ≥ the threshold is MET.")
    add("")
    add("| target | verdict | worst ratio | per size |")
    add("|---|---|---|---|")
    for desc, verdict, worst, details in evaluate_targets(results, sizes, colls):
        mark = {"MET": "**MET**", "MISSED": "**MISSED**"}.get(verdict, verdict)
        add(f"| {desc} | {mark} | {worst} | {details} |")
    add("")
    add("Not evaluated here: 8-byte latency within 2× of the shared-memory ping-pong limit (no such baseline "
        "in this run) and the cost of fingerprints (bench/fingerprint_overhead.cpp).")
    add("")

    add(f"## Latency at {fmt_size(min(sizes))} (µs per call)")
    add("")
    add("| collective | vigil | vigil-tcp | openmpi | mpich | gloo | openmpi/vigil | mpich/vigil | gloo/vigil |")
    add("|---|---|---|---|---|---|---|---|---|")
    s0 = min(sizes)
    for coll in colls:
        t = {lib: results.value(lib, coll, s0, "time_us") for lib in COLL_LIBS}
        add(f"| {coll} | " + " | ".join(cell(results, lib, coll, s0, "time_us", R) for lib in COLL_LIBS) + " | "
            + " | ".join(fmt_ratio(t[p], t["vigil"]) for p in PEERS) + " |")
    pp = results.value("tcp", "pingpong", 8, "time_us")
    add("")
    add(f"TCP ping-pong one-way (8 B, loopback): {fmt_v(pp)} µs.")
    add("")

    for coll in colls:
        add(f"## {coll} — busbw (GB/s)")
        add("")
        add("| size | vigil | openmpi | mpich | gloo | vigil/openmpi | vigil/mpich | vigil/gloo | vigil-tcp | "
            "vigil-tcp/gloo |")
        add("|---|---|---|---|---|---|---|---|---|---|")
        for s in sizes:
            vv = results.value("vigil", coll, s)
            vt = results.value("vigil-tcp", coll, s)
            add(f"| {fmt_size(s)} | " + " | ".join(cell(results, lib, coll, s, rounds=R)
                                                 for lib in ("vigil", "openmpi", "mpich", "gloo")) + " | "
                + " | ".join(fmt_ratio(vv, results.value(p, coll, s)) for p in PEERS) + " | "
                + cell(results, "vigil-tcp", coll, s, rounds=R) + " | "
                + fmt_ratio(vt, results.value("gloo", coll, s)) + " |")
        add("")

    add("## Limits of this machine, and vigil against them")
    add("")
    add("memcpy: one thread, GB/s; sum: out = a + b in float32, one thread, GB/s of one array; tcp stream: "
        "both directions at once (as a ring step), GB/s per direction; stream1: one direction. "
        "vigil allreduce busbw as % of memcpy, vigil-tcp allreduce busbw as % of the full-duplex stream.")
    add("")
    add("| size | memcpy | sum | tcp stream | tcp stream1 | vigil allreduce / memcpy | "
        "vigil-tcp allreduce / tcp stream |")
    add("|---|---|---|---|---|---|---|")
    for s in sizes:
        mc = results.value("memcpy", "memcpy", s)
        st = results.value("tcp", "stream", s)
        va = results.value("vigil", "allreduce", s)
        vt = results.value("vigil-tcp", "allreduce", s)
        add(f"| {fmt_size(s)} | {cell(results, 'memcpy', 'memcpy', s, rounds=R)} | "
            f"{cell(results, 'memcpy', 'sum', s, rounds=R)} | {cell(results, 'tcp', 'stream', s, rounds=R)} | "
            f"{cell(results, 'tcp', 'stream1', s, rounds=R)} | {pct(va, mc)} | {pct(vt, st)} |")
    add("")
    if png_name:
        add(f"![busbw against size]({png_name})")
        add("")
    path.write_text("\n".join(lines))


def write_plot(path, sizes, colls, results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare.py: matplotlib missing, no plot (run bench/deps.sh)", file=sys.stderr)
        return False
    ncols = 3 if len(colls) > 4 else min(2, len(colls))
    nrows = math.ceil(len(colls) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.9 * nrows), squeeze=False)
    styles = {"vigil": ("C0", "-", "o"), "vigil-tcp": ("C0", "--", "s"), "openmpi": ("C1", "-", "^"),
              "mpich": ("C2", "-", "v"), "gloo": ("C3", "-", "D")}
    for ax, coll in zip(axes.flat, colls):
        for lib in COLL_LIBS:
            pts = [(s, results.value(lib, coll, s)) for s in sizes]
            pts = [(s, v) for s, v in pts if v]
            if pts:
                color, ls, marker = styles[lib]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, linestyle=ls, marker=marker,
                        markersize=3, label=lib)
        for lib, c, label, ls in (("memcpy", "memcpy", "memcpy (1 thread)", ":"),
                                  ("tcp", "stream", "tcp full duplex", "-.")):
            pts = [(s, results.value(lib, c, s)) for s in sizes]
            pts = [(s, v) for s, v in pts if v]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color="grey", linestyle=ls, linewidth=1,
                        label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(coll)
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("busbw (GB/s)")
        ticks = [s for s in sizes if s in (8, 1 << 10, 1 << 20, 16 << 20, 64 << 20) or s == sizes[-1]]
        ax.set_xticks(ticks)
        ax.set_xticklabels([fmt_size(t).replace(" ", "") for t in ticks])
        ax.grid(True, which="major", alpha=0.3)
    for ax in list(axes.flat)[len(colls):]:
        ax.axis("off")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lbl in zip(*ax.get_legend_handles_labels()):
            if lbl not in labels:
                handles.append(h)
                labels.append(lbl)
    fig.legend(handles, labels, loc="lower center", ncol=min(7, len(labels)), frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
