#!/usr/bin/env python3
"""Measures vigil against Open MPI, MPICH and Gloo, and against the machine's
memory and TCP limits, in one run, alternating between them.

Every program prints the JSON lines of vigil-perf (same method, same fields;
see bench/README.md and shared/perf.md). For each round, each size band and
each library in turn (the order rotates from round to round, so no library
always runs right after the same neighbour), one program is started. A
library's figure for a (collective, size) is the median over rounds of the
per-run medians.

Writes bench/results/<date>.md (tables, limits, targets), <date>-busbw.png
(busbw against size) and <date>-raw.jsonl (every record, for re-analysis).

Needs only python3 and matplotlib (the plot is skipped without it).
"""

import argparse
import datetime
import importlib.util
import json
import math
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ALL_COLLS = ["allreduce", "allgather", "reducescatter", "alltoall", "broadcast",
             "reduce", "gather", "scatter", "sendrecv"]
COLL_LIBS = ["vigil", "vigil-tcp", "openmpi", "mpich", "gloo"]
BASELINE_LIBS = ["memcpy", "tcp"]
ALL_LIBS = COLL_LIBS + BASELINE_LIBS
PEERS = ["openmpi", "mpich", "gloo"]
MIB = 1 << 20

# Sizes above this get fewer calls per sample (see iters_for).
FULL_ITERS_UP_TO = 256 * 1024


# ---------------------------------------------------------------- sizes ---

def parse_size(text):
    """'8', '1K', '64M', '1G' (binary multiples, as the C++ programs take)."""
    t = text.strip().upper().rstrip("B")
    mult = 1
    if t and t[-1] in "KMG":
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[t[-1]]
        t = t[:-1]
    return int(float(t) * mult)


def fmt_size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def sweep_sizes(lo, hi, factor):
    """Steps down from the maximum, so that with factor 4 the sweep still hits
    1, 16 and 64 MiB (where the targets are), plus the minimum itself."""
    sizes = set()
    s = float(hi)
    while s >= lo * (1 - 1e-9):
        sizes.add(int(round(s)))
        s /= factor
    sizes.add(lo)
    return sorted(sizes)


def iters_for(size, iters):
    """Full `iters` up to 256 KiB, then fewer so a 64 MiB sample stays short
    (MPIs take ~0.25 s per 64 MiB call on these machines); at least 2."""
    if size <= FULL_ITERS_UP_TO:
        return iters
    return max(2, min(iters, round(iters * FULL_ITERS_UP_TO / size)))


def make_bands(sizes, factor, iters, warmup):
    """Groups sizes into runs of one program each: same calls per sample, and
    each size `factor` times the previous (what -b/-e/-f can express)."""
    bands = []
    for s in sizes:
        n = iters_for(s, iters)
        b = bands[-1] if bands else None
        if b and b["iters"] == n and abs(s / b["sizes"][-1] - factor) < 1e-6 * factor:
            b["sizes"].append(s)
        else:
            bands.append({"sizes": [s], "iters": n, "warmup": max(1, min(warmup, n))})
    return bands


def nominal_size(reported, band_sizes):
    """Programs round sizes to whole elements per rank; map back to the size
    asked for (the nearest one on a log scale)."""
    return min(band_sizes, key=lambda s: abs(math.log(max(reported, 1) / s)))


# ------------------------------------------------------------- programs ---

class Missing(Exception):
    pass


def lib_command(lib, args, perf_args, colls):
    """argv and environment for one library's run, or Missing."""
    env = dict(os.environ)
    bench = Path(args.bench_build)
    vigil = Path(args.vigil_build)
    coll_args = ["-c", "all" if colls == ALL_COLLS else ",".join(colls)] if colls else []

    def need(path):
        if not path.is_file() or not os.access(path, os.X_OK):
            raise Missing(f"{path} not found (build it first)")
        return str(path)

    def need_tool(name):
        for d in os.environ.get("PATH", "").split(os.pathsep):
            p = Path(d) / name
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
        raise Missing(f"{name} not on PATH (run bench/deps.sh)")

    if lib in ("vigil", "vigil-tcp"):
        argv = [need(vigil / "vigil-run"), "-n", str(args.np), "--", need(vigil / "vigil-perf")]
        env["VIGIL_SOCKET_IFNAME"] = "lo"
        if lib == "vigil-tcp":
            env["VIGIL_TRANSPORT"] = "tcp"
        return argv + coll_args + perf_args, env
    if lib == "openmpi":
        argv = [need_tool("mpirun.openmpi"), "--allow-run-as-root", "--oversubscribe", "-np", str(args.np),
                need(bench / "mpi_perf_openmpi")]
        return argv + coll_args + perf_args, env
    if lib == "mpich":
        argv = [need_tool("mpiexec.mpich"), "-n", str(args.np), need(bench / "mpi_perf_mpich")]
        return argv + coll_args + perf_args, env
    if lib == "gloo":
        return [need(bench / "gloo_perf"), "--np", str(args.np)] + coll_args + perf_args, env
    if lib == "memcpy":
        return [need(bench / "memcpy_bw")] + perf_args, env
    if lib == "tcp":
        return [need(bench / "tcp_stream")] + perf_args, env
    raise Missing(f"unknown library {lib}")


def run_program(argv, env, timeout):
    """Runs one program in its own process group (so a timeout can stop its
    ranks too). Returns (rc, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        rc = 124
        err += f"\n(stopped after {timeout} s)"
    return rc, out, err, time.monotonic() - t0


def parse_records(text):
    """JSON objects, one per line; vigil-run prefixes lines with '[rank] '."""
    records = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            rec = json.loads(line[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "coll" in rec and "bytes" in rec:
            records.append(rec)
    return records


# ------------------------------------------------------------ the run ---

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


def run_band(lib, band, colls, args, results, rnd, label):
    sizes = band["sizes"]
    perf_args = ["-b", str(sizes[0]), "-e", str(sizes[-1]), "-f", str(args.factor),
                 "-n", str(band["iters"]), "-w", str(band["warmup"]), "-s", str(args.samples), "--json"]
    # One program for all the collectives (fewer start-ups); with --per-coll,
    # or to recover from a failed all-in-one run, one per collective.
    if lib in BASELINE_LIBS:
        plans = [None]
    elif len(colls) > 1 and not args.per_coll:
        plans = [list(colls)]
    else:
        plans = [[c] for c in colls]
    for plan in plans:
        argv, env = lib_command(lib, args, perf_args, plan)
        rc, out, err, secs = run_program(argv, env, args.timeout)
        got = [r for r in parse_records(out) if lib in BASELINE_LIBS or r["coll"] in (plan or [])]
        seen = set()
        for rec in got:
            # The ping-pong is always 8 bytes, whatever the band.
            size = rec["bytes"] if rec["coll"] == "pingpong" else nominal_size(rec["bytes"], sizes)
            key = (rec["coll"], size)
            if key in seen:  # Only one line per size counts (in case several ranks print).
                continue
            seen.add(key)
            results.add(lib, rec, size, rnd)
        what = "all" if plan == ALL_COLLS else (",".join(plan) if plan else lib)
        print(f"  {label} {lib:9s} {what:13s} rc={rc} {len(seen):3d} records {secs:6.1f} s", file=sys.stderr,
              flush=True)
        if rc != 0:
            tail = "\n".join(err.strip().splitlines()[-6:])
            results.failures.append((lib, label, what, rc, tail))
            if plan and len(plan) > 1:
                done = {c for c, _ in seen}
                for c in plan:
                    if c not in done:
                        sub = dict(args.__dict__)
                        sub["per_coll"] = True
                        run_band(lib, band, [c], argparse.Namespace(**sub), results, rnd, label)


def run_all(args, colls, libs):
    sizes = sweep_sizes(args.min, args.max, args.factor)
    bands = make_bands(sizes, args.factor, args.iters, args.warmup)
    results = Results()
    runnable = []
    for lib in libs:
        try:
            lib_command(lib, args, [], colls[:1] if lib in COLL_LIBS else None)
            runnable.append(lib)
        except Missing as e:
            results.missing[lib] = str(e)
            print(f"compare.py: skipping {lib}: {e}", file=sys.stderr)
    for rnd in range(args.rounds):
        k = rnd % max(1, len(runnable))
        order = runnable[k:] + runnable[:k]
        for b in bands:
            label = f"[round {rnd + 1}/{args.rounds}, {fmt_size(b['sizes'][0])}..{fmt_size(b['sizes'][-1])}]"
            for lib in order:
                run_band(lib, b, colls, args, results, rnd, label)
    return sizes, bands, results


# ------------------------------------------------------------- context ---

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:  # Only used for the report's notes.
        return ""


def machine_info():
    model = sh("lscpu | sed -n 's/^Model name: *//p'") or "unknown"
    cpus = sh("nproc")
    mem = sh("free -g | awk '/^Mem:/ {print $2}'")
    return {
        "cpu": model,
        "cpus": cpus,
        "mem_gib": mem,
        "kernel": sh("uname -sr"),
        "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "thp": sh("cat /sys/kernel/mm/transparent_hugepage/enabled"),
    }


def versions(args):
    vigil_dir = Path(args.vigil_build)
    return {
        "vigil": (sh(f"git -C {shlex.quote(str(REPO))} rev-parse --short HEAD") + (
            " (uncommitted changes)" if sh(f"git -C {shlex.quote(str(REPO))} status --porcelain") else "")),
        "vigil build": str(vigil_dir),
        "Open MPI": sh("mpirun.openmpi --version 2>&1 | head -1") or "not installed",
        "MPICH": sh("mpiexec.mpich --version 2>&1 | sed -n 's/^ *Version: *//p' | head -1") or "not installed",
        "Gloo": sh("dpkg-query -W -f='${Package} ${Version}' libgloo0 2>/dev/null") or "not installed",
        "g++": sh("g++ --version | head -1"),
    }


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


# ---------------------------------------------------------------- main ---

def use_system_python_for_matplotlib():
    """Debian's python3-matplotlib is installed for /usr/bin/python3; when
    another python3 comes first on PATH (pyenv, a venv) without matplotlib,
    run under the system one instead of losing the plot."""
    if importlib.util.find_spec("matplotlib") is not None:
        return
    system = "/usr/bin/python3"
    if os.path.realpath(sys.executable) == os.path.realpath(system) or not os.access(system, os.X_OK):
        return
    probe = subprocess.run([system, "-c", "import matplotlib"], capture_output=True)
    if probe.returncode == 0:
        os.execv(system, [system, os.path.abspath(__file__), *sys.argv[1:]])


def main():
    use_system_python_for_matplotlib()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, default=2, help="ranks (default 2)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of alternation (default 3)")
    p.add_argument("--min", type=parse_size, default=8, help="smallest size (default 8)")
    p.add_argument("--max", type=parse_size, default=64 * MIB, help="largest size (default 64M)")
    p.add_argument("--factor", type=int, default=4, help="size step (an integer >= 2), down from --max (default 4)")
    p.add_argument("--colls", default=",".join(ALL_COLLS), help="comma list, or 'all' (default all)")
    p.add_argument("--libs", default=",".join(ALL_LIBS), help=f"comma list of {','.join(ALL_LIBS)}")
    p.add_argument("--iters", type=int, default=20, help="calls per sample up to 256 KiB, fewer above (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up calls (default 5)")
    p.add_argument("--samples", type=int, default=10, help="samples per size (default 10)")
    p.add_argument("--per-coll", action="store_true", help="one program per collective instead of -c all")
    p.add_argument("--timeout", type=float, default=900, help="seconds before one program is stopped")
    p.add_argument("--vigil-build", default=str(REPO / "build"), help="directory with vigil-run and vigil-perf")
    p.add_argument("--bench-build", default=str(REPO / "build-bench"), help="directory of bench/build_peers.sh")
    p.add_argument("--out", default=str(REPO / "bench" / "results"), help="directory for the report")
    p.add_argument("--name", help="report name (default: the date; -2, -3 … added if it exists)")
    args = p.parse_args()

    colls = ALL_COLLS if args.colls == "all" else [c for c in args.colls.split(",") if c]
    for c in colls:
        if c not in ALL_COLLS:
            p.error(f"unknown collective {c}")
    colls = [c for c in ALL_COLLS if c in colls]  # Canonical order, so "all of them" is recognised.
    libs = [lib for lib in args.libs.split(",") if lib]
    for lib in libs:
        if lib not in ALL_LIBS:
            p.error(f"unknown library {lib}")
    if args.min < 1 or args.max < args.min or args.factor < 2 or args.rounds < 1:
        p.error("need 1 <= --min <= --max, --factor >= 2, --rounds >= 1")

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now()
    name = args.name or f"{started:%Y-%m-%d}"
    if not args.name:
        k = 2
        base = name
        while (out_dir / f"{name}.md").exists():
            name = f"{base}-{k}"
            k += 1

    info = machine_info()
    vers = versions(args)
    load_before = sh("cut -d' ' -f1-3 /proc/loadavg")
    sizes, bands, results = run_all(args, colls, libs)
    load_after = sh("cut -d' ' -f1-3 /proc/loadavg")
    finished = datetime.datetime.now()

    png = out_dir / f"{name}-busbw.png"
    png_ok = write_plot(png, sizes, colls, results)
    md = out_dir / f"{name}.md"
    write_report(md, png.name if png_ok else None, args, sizes, bands, colls, libs, results, info, vers, started,
                 finished, load_before, load_after)
    raw = out_dir / f"{name}-raw.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in results.raw))
    print(f"compare.py: wrote {md}" + (f", {png}" if png_ok else "") + f", {raw}", file=sys.stderr)
    return 1 if results.wrong else 0


if __name__ == "__main__":
    sys.exit(main())
