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
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# report.py sits next to this script. Python puts the script's directory on
# sys.path by itself, but not under -P or PYTHONSAFEPATH, nor when this file
# is loaded from elsewhere; so put it there explicitly, whatever the current
# directory.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from report import (ALL_COLLS, ALL_LIBS, BASELINE_LIBS, COLL_LIBS, MIB,  # noqa: E402
                    Results, fmt_size, write_plot, write_report)

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
