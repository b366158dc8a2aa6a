# Copied from the project's anchors (shared/anchors/bench_ddp.py, measured 2026-11-22 on the
# 2-vCPU dev box, python3-torch 1.13.1 from Debian 12); changes: usage path in the docstring only
# (anchors/ -> bench/torch/, results/ -> bench/torch/results/); since 2026-11-26 `--width K`
# (ref_model's channel multiplier, default 1: the model as before).
"""Item 3: PyTorch DistributedDataParallel, gloo backend, CPU.

    /usr/bin/python3 bench/torch/bench_ddp.py --nproc 2 --out bench/torch/results/ddp_np2.json
    /usr/bin/python3 bench/torch/bench_ddp.py --nproc 2 --width 4 --epochs 0   # 4x channels

--nproc N starts N local ranks with torch.multiprocessing.spawn (gloo over
127.0.0.1). Under torchrun (RANK set) it just runs as one rank. Note: Debian's
torchrun 1.13 crashes under Python 3.11 (to_map: 'NoneType' has no .get), hence
the built-in launcher.

Every rank: torch.set_num_threads(--threads, default 1), local batch =
global batch (128) / world size, same seeded model (DDP also broadcasts rank 0's
params at construction), `--width K` times the channels of every layer (default
1). DDP defaults: broadcast_buffers=True (BN running stats are broadcast from
rank 0 before every forward), bucket_cap_mb=25, plain (non-synced) BatchNorm.

(a) step timing, `--warmup` untimed + `--steps` timed steps per mode, the
    modes interleaved round-robin; before each step all ranks meet in a
    barrier (outside the timed region), the step time is the max over ranks:
      sync       : normal DDP step (fwd + bwd with gradient all-reduce + SGD)
      no_sync    : same, but backward inside ddp.no_sync() -> no communication
      sync_nobuf : DDP(broadcast_buffers=False), i.e. gradient all-reduce only
    comm share ~= (sync - no_sync) / sync   (width 1: a single 311 KB bucket, so DDP
    cannot overlap the all-reduce with backward here).
    Also: a bare dist.all_reduce of a gradient-sized float32 buffer.
(b) `--epochs` epochs with DistributedSampler(shuffle, seed), epoch wall time
    between two barriers (eval excluded), test accuracy (rank 0, eval mode)
    after every epoch.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_single  # noqa: E402
import bench_util  # noqa: E402
import mnist  # noqa: E402
import ref_model  # noqa: E402


def max_over_ranks(vals):
    t = torch.tensor(vals, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def step(ddp, opt, x, y, sync=True):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(ddp(x), y)
    if sync:
        loss.backward()
    else:
        with ddp.no_sync():
            loss.backward()
    opt.step()
    return loss


def time_modes(xtr, ytr, local_b, warmup, steps, seed, modes, width=1):
    """Round-robin over `modes` (one DDP instance each) so that slow drifts of
    the machine hit all modes alike."""
    rank = dist.get_rank()
    runs = {}
    for m in modes:
        ddp = DDP(ref_model.build_model(seed, width), broadcast_buffers=(m != "sync_nobuf"))
        g = torch.Generator().manual_seed(seed * 1000 + rank)
        runs[m] = dict(ddp=ddp, opt=ref_model.make_optimizer(ddp), times=[],
                       idx=torch.randint(0, len(xtr), (warmup + steps, local_b), generator=g))
    for i in range(warmup + steps):
        for m, r in runs.items():
            x, y = xtr[r["idx"][i]], ytr[r["idx"][i]]
            dist.barrier()
            t0 = time.perf_counter()
            step(r["ddp"], r["opt"], x, y, sync=(m != "no_sync"))
            if i >= warmup:
                r["times"].append(time.perf_counter() - t0)
    out = {}
    for m, r in runs.items():
        # throughput block: `steps` back-to-back steps without per-step barriers
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(steps):
            step(r["ddp"], r["opt"], xtr[r["idx"][i]], ytr[r["idx"][i]], sync=(m != "no_sync"))
        dist.barrier()
        block = (time.perf_counter() - t0) / steps
        st = bench_util.stats(max_over_ranks(r["times"]))
        st["block_mean_s_per_step"] = max_over_ranks([block])[0]
        st["rank0_median"] = bench_util.stats(r["times"])["median"]
        out[m] = st
    return out


def time_bare_allreduce(numel, warmup=10, iters=100):
    buf = torch.ones(numel, dtype=torch.float32)
    times = []
    for i in range(warmup + iters):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return bench_util.stats(max_over_ranks(times))


def train(xtr, ytr, xte, yte, local_b, epochs, seed, width=1):
    rank, world = dist.get_rank(), dist.get_world_size()
    ddp = DDP(ref_model.build_model(seed, width))
    opt = ref_model.make_optimizer(ddp)
    sampler = DistributedSampler(range(len(xtr)), num_replicas=world, rank=rank,
                                 shuffle=True, seed=seed, drop_last=False)
    log = []
    for ep in range(1, epochs + 1):
        sampler.set_epoch(ep)
        idx = torch.tensor(list(sampler))
        dist.barrier()
        t0 = time.perf_counter()
        tot, nb = 0.0, 0
        for i in range(0, len(idx), local_b):
            j = idx[i:i + local_b]
            tot += step(ddp, opt, xtr[j], ytr[j]).item()
            nb += 1
        dist.barrier()
        t_ep = time.perf_counter() - t0
        loss = tot / nb
        if rank == 0:
            acc, tl = bench_single.evaluate(ddp.module, xte, yte)
            log.append(dict(epoch=ep, epoch_s=t_ep, steps=nb, rank0_train_loss=loss,
                            test_acc=acc, test_loss=tl))
            print(f"  epoch {ep}: {t_ep:.2f}s  rank0 train_loss {loss:.4f}  "
                  f"test_acc {acc * 100:.2f}%", flush=True)
        dist.barrier()
    return log


def parse(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2, help="ranks to spawn (ignored under torchrun)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--global-batch", type=int, default=ref_model.HPARAMS["batch"])
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50, help="0 = skip step timing")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=ref_model.HPARAMS["seed"])
    ap.add_argument("--width", type=int, default=1,
                    help="channel multiplier K of ref_model.RefNet (default 1)")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.width < 1:
        ap.error(f"--width expects an integer >= 1, got {a.width}")
    return a


def main(a):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(a.threads)
    local_b = a.global_batch // world
    xtr, ytr = map(torch.from_numpy, mnist.load("train"))
    xte, yte = map(torch.from_numpy, mnist.load("test"))
    summ = ref_model.summary(a.width)
    start_stat = bench_util.proc_stat()
    res = dict(bench="ddp_gloo", world_size=world, threads_per_rank=a.threads, width=a.width,
               params=summ["params"],
               global_batch=a.global_batch, local_batch=local_b, args=vars(a),
               machine=bench_util.machine(), torch=bench_util.torch_info(),
               step_timing={})

    if a.steps > 0:
        modes = ("sync", "no_sync", "sync_nobuf")
        timing = time_modes(xtr, ytr, local_b, a.warmup, a.steps, a.seed, modes, a.width)
        for mode in modes:
            st = timing[mode]
            st["global_images_per_s_at_median"] = a.global_batch / st["median"]
            res["step_timing"][mode] = st
            if rank == 0:
                print(f"np={world} {mode:<10s}: step min {st['min'] * 1e3:.1f} ms, median "
                      f"{st['median'] * 1e3:.1f} ms ({st['n']} steps), back-to-back mean "
                      f"{st['block_mean_s_per_step'] * 1e3:.1f} ms", flush=True)
        s, n = res["step_timing"]["sync"]["median"], res["step_timing"]["no_sync"]["median"]
        res["comm_share_est"] = (s - n) / s
        res["bare_allreduce_grad_sized"] = dict(numel=summ["params"], bytes=4 * summ["params"],
                                                **time_bare_allreduce(summ["params"]))
        res["comm_share_bare"] = res["bare_allreduce_grad_sized"]["median"] / s
        if rank == 0:
            ar = res["bare_allreduce_grad_sized"]
            print(f"comm share est {res['comm_share_est'] * 100:.1f}% (bare all_reduce / sync step: "
                  f"{res['comm_share_bare'] * 100:.1f}%); bare all_reduce of "
                  f"{ar['bytes']} B: median {ar['median'] * 1e3:.2f} ms", flush=True)

    if a.epochs > 0:
        log = train(xtr, ytr, xte, yte, local_b, a.epochs, a.seed, a.width)
        if rank == 0:
            ep = [e["epoch_s"] for e in log]
            res["train"] = dict(epochs=log, epoch_s=bench_util.stats(ep),
                                epoch_s_excl_first=bench_util.stats(ep[1:]) if len(ep) > 1 else None,
                                test_acc_by_epoch={e["epoch"]: e["test_acc"] for e in log})
    res["steal_frac_during_run"] = bench_util.steal_since(start_stat)
    if rank == 0:
        bench_util.write_json(a.out, res)
    dist.destroy_process_group()


if __name__ == "__main__":
    args = parse()
    bench_util.launch(main, args, args.nproc)
