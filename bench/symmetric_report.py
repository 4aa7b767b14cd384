#!/usr/bin/env python3
"""Tables of bench/symmetric.sh's records (one JSON object per line).

  symmetric_report.py RAW.jsonl > REPORT.md

A figure is the median over the rounds of each round's median; ratios are
taken between figures of the same run.
"""
import json
import statistics
import sys
from collections import defaultdict


def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else (f"{b >> 10} KiB" if b >= 1 << 10 else f"{b} B")


def main(path):
    recs = [json.loads(line) for line in open(path) if line.strip()]
    fig = defaultdict(list)  # (lib, test, bytes) -> values over rounds
    kernels = []
    for r in recs:
        if "us" in r:
            fig[(r["lib"], r["test"], r["bytes"])].append(r["us"])
        elif "gbps" in r:
            fig[(r["lib"], r["test"], r["bytes"])].append(r["gbps"])
        elif r.get("test") in ("allreduce", "allgather_gemm", "gemm_rs"):
            kernels.append(r)
    med = {k: statistics.median(v) for k, v in fig.items()}
    rounds = max((r.get("round", 1) for r in recs), default=0)
    out = [f"# Symmetric memory, 2 ranks on one host ({rounds} rounds, alternating)", ""]
    out += ["Each figure: the median over rounds of each run's median. OpenSHMEM: Open MPI's oshmem,",
            "`oshrun --bind-to core --mca sshmem mmap -x UCX_TLS=sm,self`; vigil ranks pinned with taskset.", ""]
    out += ["## Targets", "", "| measure | vigil | OpenSHMEM | vigil / OpenSHMEM | target | met |", "|---|---|---|---|---|---|"]

    def row(name, test, b, unit, target, ok):
        v, o = med.get(("vigil", test, b)), med.get(("openshmem", test, b))
        if v is None:
            return
        ratio = (o / v if unit == "µs" else v / o) if o else None
        out.append(f"| {name} | {v:.3f} {unit} | {'%.3f %s' % (o, unit) if o else 'n/a'} | "
                   f"{'%.2f×' % ratio if ratio else 'n/a'} {'faster' if unit == 'µs' else ''} | {target} | "
                   f"{'yes' if ok(v, o) else 'no'} |")

    row("put-signal ping-pong, one way (8 B)", "putsig_pingpong", 8, "µs", "≤ 0.40 µs", lambda v, o: v <= 0.40)
    row("barrier_all", "barrier_all", 0, "µs", "≤ 0.34 µs", lambda v, o: v <= 0.34)
    sizes = sorted({k[2] for k in med if k[1] == "put_bw"})
    for b in sizes:
        row(f"put bandwidth {size(b)}", "put_bw", b, "GB/s",
            "≥ 3× OpenSHMEM" if b >= 1 << 20 else "(not a target)",
            lambda v, o: b < 1 << 20 or (o is not None and v >= 3 * o))
    for b in sizes:
        row(f"get bandwidth {size(b)}", "get_bw", b, "GB/s", "(not a target)", lambda v, o: True)
    out += ["", "## One-sided against vigil's two-sided calls", "",
            "| measure | one-sided | send/recv | ratio |", "|---|---|---|---|"]
    a, s = med.get(("vigil", "putsig_pingpong", 8)), med.get(("vigil", "sendrecv_pingpong", 8))
    if a and s:
        out.append(f"| 8 B ping-pong, one way | {a:.3f} µs | {s:.3f} µs | {s / a:.2f}× faster |")
    for b in sizes:
        p, q = med.get(("vigil", "put_bw", b)), med.get(("vigil", "send_bw", b))
        if p and q:
            out.append(f"| {size(b)} stream | {p:.2f} GB/s | {q:.2f} GB/s | {p / q:.2f}× |")
    ar = [k for k in kernels if k["test"] == "allreduce"]
    if ar:
        out += ["", "## Allreduce on symmetric buffers against vigil's staged allreduce (float32 sum)", "",
                "| size | symmetric | staged | ratio | same bits | target (16–64 MiB) |", "|---|---|---|---|---|---|"]
        for k in ar:
            tgt = ("≥ 1.5×: " + ("met" if k["ratio"] >= 1.5 else "not met")) if k["bytes"] >= 16 << 20 else ""
            out.append(f"| {size(k['bytes'])} | {k['symmetric_ms']:.3f} ms | {k['staged_ms']:.3f} ms | "
                       f"{k['ratio']:.2f}× | {'yes' if k['same_bits'] else 'NO'} | {tgt} |")
    for test, title, parts in (("allgather_gemm", "AllGather-GEMM against vigilAllGather + the same GEMM",
                                ("allgather_ms", "gemm_ms")),
                               ("gemm_rs", "GEMM-ReduceScatter against the same GEMM + vigilReduceScatter",
                                ("gemm_ms", "reduce_scatter_ms"))):
        ks = [k for k in kernels if k["test"] == test]
        if not ks:
            continue
        out += ["", f"## {title} (float32, OpenBLAS, one thread per rank)", "",
                f"| M × K × N | kernel | sequential | ratio | {parts[0][:-3]} alone | {parts[1][:-3]} alone | "
                "max rel. diff | target ≥ 1.25× |", "|---|---|---|---|---|---|---|---|"]
        for k in ks:
            out.append(f"| {k['m']} × {k['k']} × {k['n']} | {k['kernel_ms']:.2f} ms | {k['sequential_ms']:.2f} ms | "
                       f"{k['ratio']:.2f}× | {k[parts[0]]:.2f} ms | {k[parts[1]]:.2f} ms | {k['max_rel_diff']:.1e} | "
                       f"{'met' if k['ratio'] >= 1.25 else 'not met'} |")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
