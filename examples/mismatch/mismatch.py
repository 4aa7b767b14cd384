#!/usr/bin/python3
"""What a user sees when two ranks call different collectives.

Rank 0 calls all_reduce while rank 1 calls broadcast: a bug that, in a real
training script, hides behind a rank-dependent branch. Over vigil both ranks
raise at once, and the message names both operations, both ranks and the
fix. With --compare gloo the same two calls run over gloo, which has no way
to notice: it waits until its timeout, or returns wrong data silently.

    PYTHONPATH=build/python /usr/bin/python3 examples/mismatch/mismatch.py [--compare gloo --gloo-timeout 20]

Exit status 0 when vigil reported the mismatch on both ranks.
"""

import argparse
import datetime
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import multiprocessing as mp


def worker(rank, backend, init_file, timeout_s, results):
    if backend == "vigil":
        import vigil.torch  # noqa: F401  registers the backend
    dist.init_process_group(backend, init_method="file://" + init_file, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=timeout_s))
    t = torch.full((4,), float(rank + 1))
    start = time.perf_counter()
    try:
        if rank == 0:
            dist.all_reduce(t)  # the bug: rank 1 takes another branch
        else:
            dist.broadcast(t, src=0)
        outcome = f"returned without an error; tensor = {t.tolist()}"
    except RuntimeError as e:
        outcome = f"raised RuntimeError:\n    {e}"
    results.put((rank, time.perf_counter() - start, outcome))
    results.close()
    results.join_thread()  # the result is out of this process
    # The process group may be unusable now; leave without its teardown.
    os._exit(0)


def run(backend, timeout_s):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        procs = [ctx.Process(target=worker, args=(r, backend, init_file, timeout_s, results)) for r in range(2)]
        for p in procs:
            p.start()
        outcomes = sorted(results.get(timeout=timeout_s + 120) for _ in procs)
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    print(f"== {backend}: rank 0 calls all_reduce, rank 1 calls broadcast ==")
    for rank, seconds, outcome in outcomes:
        print(f"rank {rank} after {seconds:.3f} s: {outcome}")
    return outcomes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", default="", help="another backend to run the same bug on, e.g. gloo")
    parser.add_argument("--timeout", type=float, default=60, help="process-group timeout for vigil (s)")
    parser.add_argument("--gloo-timeout", type=float, default=20, help="process-group timeout for --compare (s)")
    args = parser.parse_args()
    outcomes = run("vigil", args.timeout)
    if args.compare:
        run(args.compare, args.gloo_timeout)
    ok = all("VG-OP-002" in outcome for _, _, outcome in outcomes)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
