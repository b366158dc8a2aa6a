# Copied from the project's anchors (shared/anchors/allreduce_gloo.py, measured 2026-11-22 on the
# 2-vCPU dev box, python3-torch 1.13.1 from Debian 12); changes: usage path in the docstring only
# (anchors/ -> bench/torch/, results/ -> OUTDIR/, cpp/ -> bench/anchors/cpp/); code unchanged.
"""Item 4b: torch.distributed.all_reduce (gloo, float32 SUM, in place) over loopback.

    /usr/bin/python3 bench/torch/allreduce_gloo.py --nproc 2 --out OUTDIR/allreduce_gloo_np2.json

Same protocol as bench/anchors/cpp/allreduce_mpi.cpp: per size a correctness check, warm-up
calls, then --reps repetitions of `iters` back-to-back calls between barriers;
repetition time = max over ranks; per-call = repetition / iters; min and
median over reps; busbw = bytes * 2(n-1)/n / time (nccl-tests definition).
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402

SIZES = [4, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]


def main(a):
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    results = []
    for nbytes in SIZES:
        buf = torch.full((nbytes // 4,), float(rank + 1))
        dist.all_reduce(buf)
        ok = torch.tensor([int(bool((buf == n * (n + 1) / 2).all()))])
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        iters = min(max((256 << 20) // nbytes, 4), 1000)
        for _ in range(max(2, iters // 4)):
            dist.all_reduce(buf)
        per_call = []
        for _ in range(a.reps):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf)
            t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            per_call.append(t.item() / iters)
        st = bench_util.stats(per_call)
        f = 2 * (n - 1) / n
        r = dict(bytes=nbytes, iters=iters, correct=bool(ok.item()), time_s_min=st["min"],
                 time_s_median=st["median"], algbw_GBps_median=nbytes / st["median"] / 1e9,
                 busbw_GBps_median=nbytes * f / st["median"] / 1e9,
                 busbw_GBps_best=nbytes * f / st["min"] / 1e9)
        results.append(r)
        if rank == 0:
            print(f"np={n} {nbytes:>9d} B: median {st['median'] * 1e6:9.1f} us  "
                  f"busbw {r['busbw_GBps_median']:.3f} GB/s  correct={r['correct']}", flush=True)
    if rank == 0:
        bench_util.write_json(a.out, dict(bench="gloo_allreduce", np=n, reps=a.reps,
                                          torch=bench_util.torch_info(), results=results))
    dist.destroy_process_group()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out")
    args = ap.parse_args()
    bench_util.launch(main, args, args.nproc)
