#!/usr/bin/env python3
"""MoE dispatch/combine: vigil's operators against the same exchange written as
vigilAllToAllV + local packing (vigil-perf --impl alltoallv) and as
MPI_Alltoallv + the same packing (Open MPI, MPICH), in one run, interleaved
round by round. Writes bench/results/<date>-moe.md and prints it.

    bench/deps.sh && bench/build_peers.sh && python3 bench/compare_moe.py [--np 4] [--rounds 3]

Timings are reported, never asserted.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHAPES = [  # tokens per rank, hidden, top-k, experts
    (64, 1024, 8, 32),
    (256, 1024, 8, 32),
    (256, 4096, 8, 64),
]


def run(argv, env):
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    records = []
    for line in out.stdout.splitlines():
        line = line.split("] ", 1)[1] if line.startswith("[") else line
        if line.startswith("{"):
            records.append(json.loads(line))
    return records


def commands(args, shape):
    tokens, hidden, topk, experts = shape
    common = ["--tokens", str(tokens), "--hidden", str(hidden), "--topk", str(topk), "--experts", str(experts),
              "-n", str(args.iters), "-s", "5", "-w", "3"]
    vigil, bench = Path(args.vigil_build), Path(args.bench_build)
    env = dict(os.environ, VIGIL_SOCKET_IFNAME="lo")
    yield "vigil", [str(vigil / "vigil-run"), "-n", str(args.np), "--", str(vigil / "vigil-perf"), "-c", "moe",
                    "--json"] + common, env
    if (bench / "mpi_moe_openmpi").exists():
        yield "openmpi", ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", str(args.np),
                          str(bench / "mpi_moe_openmpi")] + common, dict(os.environ)
    if (bench / "mpi_moe_mpich").exists():
        yield "mpich", ["mpiexec.mpich", "-n", str(args.np), str(bench / "mpi_moe_mpich")] + common, dict(os.environ)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--vigil-build", default=str(REPO / "build"))
    p.add_argument("--bench-build", default=str(REPO / "build-bench"))
    args = p.parse_args()

    times = {}  # (shape, label, op) -> [us]
    for rnd in range(args.rounds):
        for shape in SHAPES:
            for lib, argv, env in commands(args, shape):
                for r in run(argv, env):
                    label = "vigil MoE" if r["lib"] == "vigil" and r["impl"] == "vigil" else (
                        "vigil AllToAllV+packing" if r["lib"] == "vigil" else f"{r['lib']} Alltoallv+packing")
                    times.setdefault((shape, label, r["op"]), []).append(r["us"])
            print(f"round {rnd + 1}/{args.rounds}: shape {shape} done", file=sys.stderr)

    date = datetime.date.today().isoformat()
    lines = [f"# MoE dispatch / combine, {args.np} ranks on one host ({date})", "",
             f"`python3 bench/compare_moe.py --np {args.np} --rounds {args.rounds}`; medians over rounds of "
             "each run's median µs per call (the slowest rank's); float32 rows, routed experts only; "
             "GB/s = selections × row bytes / time per rank. Ratio = other / vigil MoE (> 1: vigil is faster).", ""]
    for op in ("dispatch", "combine"):
        lines += [f"## {op}", "", "| tokens | hidden | top-k | experts | implementation | µs | GB/s | ratio |",
                  "|---|---|---|---|---|---|---|---|"]
        for shape in SHAPES:
            tokens, hidden, topk, experts = shape
            ref = times.get((shape, "vigil MoE", op))
            refmed = statistics.median(ref) if ref else None
            for (s, label, o), us in sorted(times.items(), key=lambda kv: kv[0][1] != "vigil MoE"):
                if s != shape or o != op:
                    continue
                med = statistics.median(us)
                gbps = tokens * topk * hidden * 4 / (med * 1e-6) / 1e9
                ratio = f"{med / refmed:.2f}" if refmed else "-"
                lines.append(f"| {tokens} | {hidden} | {topk} | {experts} | {label} | {med:.1f} | {gbps:.2f} | {ratio} |")
        lines.append("")
    text = "\n".join(lines)
    out = REPO / "bench" / "results" / f"{date}-moe.md"
    out.write_text(text + "\n")
    print(text)
    print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
