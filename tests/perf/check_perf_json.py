#!/usr/bin/env python3
"""Checks the JSON lines of one vigil-perf run.

Usage: check_perf_json.py OUTPUT NRANKS COLLS DTYPES OPS MINBYTES MAXBYTES FACTOR

OUTPUT is vigil-run's stdout (lines prefixed "[rank] "). COLLS, DTYPES and OPS are
comma-separated lists as given to vigil-perf (no "all"). Asserts that the JSON rows are
exactly the expected (collective, bytes, dtype, op) combinations, once each, with the
agreed keys in the agreed order, consistent figures and no wrong element.
"""

import json
import re
import sys

KEYS = ["lib", "coll", "nranks", "bytes", "count", "dtype", "op", "time_us", "time_us_min", "time_us_max",
        "algbw_gbs", "busbw_gbs", "wrong"]
ELEMENT_SIZE = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "float16": 2,
                "float32": 4, "float64": 8, "bfloat16": 2}
REDUCTIONS = {"allreduce", "reducescatter", "reduce"}
SPLIT_BY_RANKS = {"allgather", "reducescatter", "alltoall", "gather", "scatter"}


def bus_factor(coll, n):
    if coll == "allreduce":
        return 2 * (n - 1) / n
    if coll in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    return (n - 1) / n


def requested_sizes(lo, hi, factor):
    size = lo
    while size <= hi:
        yield size
        size *= factor


def main():
    path, n, colls, dtypes, ops, lo, hi, factor = sys.argv[1:]
    n, lo, hi, factor = int(n), int(lo), int(hi), int(factor)
    colls, dtypes, ops = colls.split(","), dtypes.split(","), ops.split(",")

    expected = {}
    for coll in colls:
        if coll == "sendrecv" and n < 2:
            continue
        for dtype in dtypes:
            for op in (ops if coll in REDUCTIONS else ["none"]):
                for size in requested_sizes(lo, hi, factor):
                    unit = n * ELEMENT_SIZE[dtype]
                    nbytes = size // unit * unit
                    if nbytes == 0:
                        continue
                    count = nbytes // ELEMENT_SIZE[dtype] // (n if coll in SPLIT_BY_RANKS else 1)
                    expected[(coll, nbytes, dtype, op)] = count

    problems = []
    seen = set()
    with open(path) as f:
        for line in f:
            text = re.sub(r"^\[\d+\] ", "", line.rstrip("\n"))
            if not text.startswith("{"):
                continue
            if not line.startswith("[0] "):
                problems.append(f"a rank other than 0 printed a row: {line.strip()}")
            row = json.loads(text)
            if list(row) != KEYS:
                problems.append(f"keys {list(row)} != {KEYS}")
                continue
            key = (row["coll"], row["bytes"], row["dtype"], row["op"])
            if key in seen:
                problems.append(f"row printed twice: {key}")
            seen.add(key)
            if key not in expected:
                problems.append(f"unexpected row: {key}")
                continue
            if row["lib"] != "vigil" or row["nranks"] != n:
                problems.append(f"{key}: lib {row['lib']!r}, nranks {row['nranks']} (expected 'vigil', {n})")
            if row["count"] != expected[key]:
                problems.append(f"{key}: count {row['count']}, expected {expected[key]}")
            if row["wrong"] != 0:
                problems.append(f"{key}: wrong = {row['wrong']}")
            t, tmin, tmax = row["time_us"], row["time_us_min"], row["time_us_max"]
            if not 0 < tmin <= t <= tmax:
                problems.append(f"{key}: times not 0 < min {tmin} <= median {t} <= max {tmax}")
            algbw, busbw = row["algbw_gbs"], row["busbw_gbs"]
            # Printed to 3 (time) and 6 (bandwidth) decimals: compare where that precision allows.
            if t >= 10 and algbw >= 1e-3 and abs(algbw - row["bytes"] / (t * 1e3)) > 0.01 * algbw:
                problems.append(f"{key}: algbw {algbw} != bytes / time ({row['bytes'] / (t * 1e3)})")
            if algbw >= 1e-3 and abs(busbw - algbw * bus_factor(row["coll"], n)) > 0.01 * algbw + 2e-6:
                problems.append(f"{key}: busbw {busbw} != algbw * {bus_factor(row['coll'], n)}")

    for key in sorted(set(expected) - seen):
        problems.append(f"missing row: {key}")
    for p in problems[:40]:
        print(f"  {p}")
    print(f"  {len(seen)} rows checked, {len(expected)} expected, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
