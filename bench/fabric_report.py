#!/usr/bin/env python3
"""The tables of bench/fabric.sh: fabric_report.py RAW.jsonl [TITLE] > report.md

A figure is the median over rounds of each run's median (busbw, GB/s; time in
us at 8 B). Ratios: vigil-ucx against Open MPI over UCX (>1: vigil faster),
and for broadcast (between two ranks: one direction, root to the other rank)
against ucx_perftest's one-direction tag_bw at the same size: with its
default window of outstanding sends (a stream), and with one send at a time
(-O 1: what a blocking call can reach, each message waiting for the
previous one to complete). The other collectives load both directions at
once; ucx_perftest's figure with both directions loaded (two client/server
pairs at once) is listed beside them, but on a machine whose cores the
emulated hosts share, its four spinning processes make it no limit: the
ratio is left out there.
"""

import json
import statistics
import sys
from collections import defaultdict

LIBS = ["vigil-ucx", "vigil-tcp", "openmpi-ucx", "vigil"]


def fmt_size(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def main():
    raw = sys.argv[1]
    title = sys.argv[2] if len(sys.argv) > 2 else ""
    runs = defaultdict(list)  # (placement, coll, bytes, label) -> [record]
    perftest = defaultdict(list)  # (label, test, bytes) -> [record]
    with open(raw) as f:
        for line in f:
            r = json.loads(line)
            if r["label"].startswith("ucx_perftest"):
                perftest[(r["label"], r["coll"], r["bytes"])].append(r)
            else:
                runs[(r["placement"], r["coll"], r["bytes"], r["label"])].append(r)

    def figure(placement, coll, size, label, key):
        rs = runs.get((placement, coll, size, label))
        return statistics.median(r[key] for r in rs) if rs else None

    def limit(size, label):
        rs = perftest.get((label, "tag_bw", size))
        return statistics.median(r["bw_gbs"] for r in rs) if rs else None

    print(f"# vigil over UCX: fabric comparison ({title})\n")
    lat = perftest.get(("ucx_perftest", "tag_lat", 8))
    if lat:
        print(f"ucx_perftest between the hosts: tag_lat 8 B = {statistics.median(r['lat_us'] for r in lat):.2f} us "
              "(one way); tag_bw per size in the tables' last columns: one direction (a stream, and one send at a "
              "time), and per direction with both loaded at once.\n")
    wrong = sum(r.get("wrong", 0) for rs in runs.values() for r in rs)
    print(f"Elements checked wrong over all runs: {wrong}.\n")
    for placement, heading in (("2hosts", "Two hosts, one rank each"), ("1host", "One host, two ranks")):
        present = [lab for lab in LIBS if any(k[0] == placement and k[3] == lab for k in runs)]
        if not present:
            continue
        print(f"## {heading}\n")
        print("busbw in GB/s (time in us for 8 B rows), median over rounds.\n")
        cols = present + ["ucx/ompi"] + (["perftest 1 dir", "perftest 1 dir, 1 at a time", "perftest 2 dirs",
                                           "ucx/perftest", "ucx/perftest 1 at a time"]
                                          if placement == "2hosts" else [])
        print("| coll | size | " + " | ".join(cols) + " |")
        print("|" + "---|" * (len(cols) + 2))
        keys = sorted({(k[1], k[2]) for k in runs if k[0] == placement}, key=lambda k: (k[0], k[1]))
        for coll, size in keys:
            key = "time_us" if size == 8 else "busbw_gbs"
            vals = {lab: figure(placement, coll, size, lab, key) for lab in present}
            cells = [("-" if vals[lab] is None else f"{vals[lab]:.2f}" if key == "time_us" else f"{vals[lab]:.3f}")
                     for lab in present]
            u, o = vals.get("vigil-ucx"), vals.get("openmpi-ucx")
            if u and o:
                cells.append(f"{(o / u if key == 'time_us' else u / o):.2f}")
            else:
                cells.append("-")
            if placement == "2hosts":
                one, single, both = ((limit(size, label) if key != "time_us" else None)
                                     for label in ("ucx_perftest", "ucx_perftest_w1", "ucx_perftest_bidir"))
                for lim in (one, single, both):
                    cells.append("-" if lim is None else f"{lim:.3f}")
                for lim in (one, single):
                    one_way = coll == "broadcast" and lim is not None and u is not None
                    cells.append(f"{u / lim:.2f}" if one_way else "-")
            print(f"| {coll} | {fmt_size(size)} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
