"""PyTorch's ZeRO-1 (torch.distributed.optim.ZeroRedundancyOptimizer) beside plain DDP, both
with AdamW, gloo backend, CPU: the anchor of bench/sharded.sh (chapter 09).

    /usr/bin/python3 bench/torch/bench_zero.py --nproc 2 [--width K] [--steps N]

Every rank: torch.set_num_threads(1), local batch = 128 / world size, the model of
ref_model.py (--width K: channels x K), the same seeded weights. Modes, one after the other,
each with a model of its own: `ddp` (DDP + torch.optim.AdamW) and `zero1` (DDP +
ZeroRedundancyOptimizer(optimizer_class=AdamW): each rank steps its partition, then the
updated parameters are broadcast from their owners). AdamW: lr 1e-3, weight decay 0.01 (as
bench_sharded_step). `--warmup` untimed and `--steps` timed steps; a step's time is the
slowest rank's, between two barriers. Prints one line per mode, in the format of
bench_sharded_step:  np=2 width=1 zero1: step min 70.1 ms, median 72.3 ms
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402
import mnist  # noqa: E402
import ref_model  # noqa: E402


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2, help="ranks to spawn (ignored under torchrun)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--width", type=int, default=1)
    return ap.parse_args()


def main(a):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    local_b = 128 // world
    xtr, ytr = map(torch.from_numpy, mnist.load("train"))
    for mode in ("ddp", "zero1"):
        ddp = DDP(ref_model.build_model(0, a.width))
        if mode == "ddp":
            opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3, weight_decay=0.01)
        else:
            opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW,
                                          lr=1e-3, weight_decay=0.01)
        g = torch.Generator().manual_seed(1000 + rank)
        times = []
        for i in range(a.warmup + a.steps):
            idx = torch.randperm(len(xtr), generator=g)[:local_b]
            x, y = xtr[idx], ytr[idx]
            dist.barrier()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(ddp(x), y).backward()
            opt.step()
            if i >= a.warmup:
                times.append(time.perf_counter() - t0)
        t = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        st = bench_util.stats(t.tolist())
        if rank == 0:
            print(f"np={world} width={a.width} {mode:<5s}: step min {st['min'] * 1e3:.1f} ms, "
                  f"median {st['median'] * 1e3:.1f} ms", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    args = parse()
    bench_util.launch(main, args, args.nproc)
