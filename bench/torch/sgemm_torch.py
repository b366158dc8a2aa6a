# Copied from the project's anchors (shared/anchors/sgemm_torch.py, measured 2026-11-22 on the
# 2-vCPU dev box, python3-torch 1.13.1 from Debian 12); changes: usage path in the docstring only
# (anchors/ -> bench/torch/, results/ -> OUTDIR/); code unchanged.
"""Item 5: float32 GEMM throughput through PyTorch, n x n x n, 1 and 2 threads.

    /usr/bin/python3 bench/torch/sgemm_torch.py --out OUTDIR/sgemm_torch.json

  torch.mm          : dense CPU path = the system libblas.so.3 (on this Debian box
                      the netlib reference BLAS, single-threaded, unoptimized)
  oneDNN (mkldnn)   : torch._C._nn.mkldnn_linear(A, B) = A @ B^T on mkldnn tensors,
                      the oneDNN kernels that PyTorch's CPU convolutions use.
GFLOP/s = 2 n^3 / time; one warm-up call, then --reps timed calls (fewer for the slow path).
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402


def bench(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return bench_util.stats(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--reps-slow", type=int, default=3, help="reps for torch.mm at n=2048")
    ap.add_argument("--out")
    a = ap.parse_args()
    torch.manual_seed(0)
    res = dict(bench="sgemm_torch", torch=bench_util.torch_info(), results=[])
    for n in (1024, 2048):
        A, B = torch.randn(n, n), torch.randn(n, n)
        Am, Bm = A.to_mkldnn(), B.to_mkldnn()
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for name, fn, reps in (
                    ("torch.mm (libblas)", lambda: torch.mm(A, B),
                     a.reps_slow if n >= 2048 else a.reps),
                    ("oneDNN mkldnn_linear", lambda: torch._C._nn.mkldnn_linear(Am, Bm, None),
                     a.reps)):
                st = bench(fn, reps)
                r = dict(path=name, n=n, threads=threads, time_s=st,
                         GFLOPs_best=2 * n ** 3 / st["min"] / 1e9,
                         GFLOPs_median=2 * n ** 3 / st["median"] / 1e9)
                res["results"].append(r)
                print(f"{name:<22s} n={n} threads={threads}: median {st['median'] * 1e3:8.1f} ms "
                      f"-> {r['GFLOPs_median']:6.1f} GFLOP/s (best {r['GFLOPs_best']:.1f}, {reps} reps)",
                      flush=True)
    bench_util.write_json(a.out, res)


if __name__ == "__main__":
    main()
