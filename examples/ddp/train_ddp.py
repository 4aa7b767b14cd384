#!/usr/bin/python3
"""Trains a small model with DistributedDataParallel over vigil and checks it
against the same training in one process on the full batch.

Every rank trains on its shard of one fixed batch; DDP averages the
gradients, so each step equals a full-batch step of the single-process run:
the losses and the final weights must agree to float32 rounding. With
--compare gloo the same training runs over gloo too, for the step time.

    PYTHONPATH=build/python /usr/bin/python3 examples/ddp/train_ddp.py --ranks 4 --steps 30 --compare gloo

Exit status 0 when the distributed run matches the single-process one.
"""

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

SAMPLES, FEATURES, HIDDEN = 512, 32, 256
LR = 0.05


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                         nn.Linear(HIDDEN, 1))


def make_data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    y = torch.sin(x[:, :4].sum(dim=1, keepdim=True)) + 0.1 * torch.randn(SAMPLES, 1, generator=g)
    return x, y


def single_process(steps):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = make_data()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().clone() for p in model.parameters()]


def worker(rank, world, backend, init_file, steps, results):
    torch.set_num_threads(1)
    if backend == "vigil":
        import vigil.torch  # noqa: F401  registers the backend
    dist.init_process_group(backend, init_method="file://" + init_file, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    model = DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = make_data()
    shard = slice(rank * SAMPLES // world, (rank + 1) * SAMPLES // world)
    losses, times = [], []
    for _ in range(steps):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x[shard]), y[shard])
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()
        times.append(time.perf_counter() - start)
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / world)
    if rank == 0:
        # numpy copies: tensors would travel as shared memory that this process takes with it
        weights = [p.detach().numpy().copy() for p in model.module.parameters()]
        results.put((losses, weights, statistics.median(times)))
    dist.destroy_process_group()


def distributed(backend, world, steps):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        procs = [ctx.Process(target=worker, args=(r, world, backend, init_file, steps, results)) for r in range(world)]
        for p in procs:
            p.start()
        out = results.get(timeout=600)
        for p in procs:
            p.join(timeout=120)
        failed = [p.exitcode for p in procs if p.exitcode != 0]
        if failed:
            raise SystemExit(f"{backend}: a rank exited with {failed[0]}")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--compare", default="", help="another backend to time the same training on, e.g. gloo")
    args = parser.parse_args()

    ref_losses, ref_params = single_process(args.steps)
    losses, params, step_s = distributed("vigil", args.ranks, args.steps)
    print(f"DDP over vigil, {args.ranks} ranks, {args.steps} steps of SGD on {SAMPLES} samples "
          f"({SAMPLES // args.ranks} per rank) against one process on the full batch:")
    print(" step   loss (vigil DDP)   loss (1 process)   difference")
    for i in range(0, args.steps, max(1, args.steps // 6)):
        print(f" {i:4d}   {losses[i]:16.9f}   {ref_losses[i]:16.9f}   {losses[i] - ref_losses[i]:+.2e}")
    loss_diff = max(abs(a - b) for a, b in zip(losses, ref_losses))
    param_diff = max((torch.from_numpy(p) - q).abs().max().item() for p, q in zip(params, ref_params))
    print(f"max |loss difference| = {loss_diff:.3e}, max |weight difference| = {param_diff:.3e}")
    print(f"median step time: vigil {step_s * 1e3:.2f} ms")
    if args.compare:
        other_losses, _, other_s = distributed(args.compare, args.ranks, args.steps)
        other_diff = max(abs(a - b) for a, b in zip(other_losses, ref_losses))
        print(f"median step time: {args.compare} {other_s * 1e3:.2f} ms "
              f"(vigil is {other_s / step_s:.2f}x as fast; {args.compare}'s max |loss difference| = {other_diff:.3e})")
    # float32 sums in another order: agreement to a few ulps of the values involved.
    ok = loss_diff < 1e-5 and param_diff < 1e-5
    print("agreement:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
