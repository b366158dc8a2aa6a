"""The reference recipe with a learning-rate schedule, at 1, 2 or 4 ranks (PyTorch, CPU).

    /usr/bin/python3 bench/torch/recipe.py --ranks 1 --seeds 0,1,2,3,4,5,6,7,8,9
    /usr/bin/python3 bench/torch/recipe.py --ranks 2 --seeds 0,1,2,3,4,5,6,7,8,9
    /usr/bin/python3 bench/torch/recipe.py --ranks 4 --seeds 0,1,2,3,4,5,6,7,8,9 [--sync-bn]

Recipe: RefNet of ref_model.py (torch.manual_seed(seed) before building it), 5 epochs,
SGD lr 0.1 momentum 0.9 weight decay 5e-4 (ref_model.make_optimizer), mean cross-entropy,
global batch 128, last partial batch kept (8,000 = 62*128 + 64 -> 63 steps per epoch).
Schedule, set before every optimizer step t (w = steps per epoch, total = 5*w):
    t <  w : lr(t) = 0.1 * (0.1 + 0.9 * t / w)                     warm-up from lr/10
    t >= w : lr(t) = 0.1 * 0.5 * (1 + cos(pi * (t - w) / (total - w)))  cosine to 0
This is shared/anchors/recipe_schedule.py, mode `cos`.

--ranks 1: one process, torch.set_num_threads(2); the data order is torch.randperm(8000)
  drawn once per epoch from a torch.Generator seeded with the seed, exactly as
  recipe_schedule.py (so it reproduces its numbers bit for bit on the same machine).
--ranks W>1: W processes (bench_util.launch: torch.multiprocessing spawn, env:// on
  127.0.0.1), 1 thread each, DDP (defaults: broadcast_buffers=True, bucket 25 MB) over gloo,
  DistributedSampler(shuffle=True, seed=seed, drop_last=False) with set_epoch(e), e = 0..4,
  per-rank batch 128/W, plain (per-rank) BatchNorm.
--sync-bn (W>1): BatchNorm layers synchronised over the ranks before DDP is built. PyTorch
  1.13's nn.SyncBatchNorm refuses CPU tensors ("SyncBatchNorm expected input tensor to be on
  GPU"), so the conversion here (convert_sync_batchnorm_cpu) swaps in CpuSyncBatchNorm2d:
  the same arithmetic as SyncBatchNorm (batch mean and biased variance over all ranks' images,
  running variance updated with the unbiased global variance, gradients through the
  all-reduces), written with differentiable all-reduces (torch.distributed.nn.functional)
  on a process group of its own.

After epoch 5 rank 0 evaluates ddp.module (eval mode, BN running statistics) on the 2,000
test images. One line per seed: `ranks W seed S acc XX.XX`, then min and median.
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_single  # noqa: E402
import bench_util  # noqa: E402
import mnist  # noqa: E402
import ref_model  # noqa: E402

EPOCHS, GLOBAL_BATCH, BASE_LR = 5, 128, 0.1


def lr_at(step, w, total):
    if step < w:
        return BASE_LR * (0.1 + 0.9 * step / w)
    return BASE_LR * 0.5 * (1 + math.cos(math.pi * (step - w) / (total - w)))


# ---- CPU stand-in for nn.SyncBatchNorm (which is CUDA-only in PyTorch 1.13)
class CpuSyncBatchNorm2d(nn.BatchNorm2d):
    group = None  # process group for the statistics all-reduces

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        from torch.distributed.nn.functional import all_reduce
        c = x.size(1)
        n = torch.tensor([x.numel() // c], dtype=x.dtype)
        s = all_reduce(torch.cat([x.sum((0, 2, 3)), n]), group=self.group)  # global sum, count
        count = s[c].detach()
        mean = s[:c] / count
        xc = x - mean.view(1, c, 1, 1)
        var = all_reduce((xc * xc).sum((0, 2, 3)), group=self.group) / count  # biased
        with torch.no_grad():
            m = self.momentum
            self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
            self.running_var.mul_(1 - m).add_(var.detach() * count / (count - 1), alpha=m)
            self.num_batches_tracked.add_(1)
        y = xc * torch.rsqrt(var + self.eps).view(1, c, 1, 1)
        return y * self.weight.view(1, c, 1, 1) + self.bias.view(1, c, 1, 1)


def convert_sync_batchnorm_cpu(module, group):
    """nn.SyncBatchNorm.convert_sync_batchnorm, for CpuSyncBatchNorm2d."""
    out = module
    if isinstance(module, nn.BatchNorm2d) and not isinstance(module, CpuSyncBatchNorm2d):
        out = CpuSyncBatchNorm2d(module.num_features, module.eps, module.momentum,
                                 module.affine, module.track_running_stats)
        out.group = group
        with torch.no_grad():
            out.weight.copy_(module.weight)
            out.bias.copy_(module.bias)
        out.running_mean, out.running_var = module.running_mean, module.running_var
        out.num_batches_tracked = module.num_batches_tracked
    for name, child in module.named_children():
        out.add_module(name, convert_sync_batchnorm_cpu(child, group))
    return out


def report(world, results, tag):
    res = sorted(results)
    print(f"ranks {world}{tag} min {res[0]:.2f} median {statistics.median(res):.2f} "
          f"(n={len(res)}: {' '.join(f'{r:.2f}' for r in results)})", flush=True)


def single(a, seeds):
    """W = 1: recipe_schedule.py cos, line for line."""
    torch.set_num_threads(2)
    xtr, ytr = map(torch.from_numpy, mnist.load("train"))
    xte, yte = map(torch.from_numpy, mnist.load("test"))
    spe = math.ceil(len(xtr) / GLOBAL_BATCH)
    total = EPOCHS * spe
    results = []
    for sd in seeds:
        t0 = time.perf_counter()
        model = ref_model.build_model(sd)
        opt = ref_model.make_optimizer(model)
        g = torch.Generator().manual_seed(sd)
        step = 0
        for ep in range(EPOCHS):
            perm = torch.randperm(len(xtr), generator=g)
            for i in range(0, len(xtr), GLOBAL_BATCH):
                for pg in opt.param_groups:
                    pg["lr"] = lr_at(step, spe, total)
                j = perm[i:i + GLOBAL_BATCH]
                bench_single.train_step(model, opt, xtr[j], ytr[j])
                step += 1
        acc, _ = bench_single.evaluate(model, xte, yte)
        results.append(acc * 100)
        print(f"ranks 1 seed {sd} acc {acc * 100:.2f}  ({time.perf_counter() - t0:.1f} s)",
              flush=True)
    report(1, results, "")


def distributed(a):
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data.distributed import DistributedSampler
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    assert GLOBAL_BATCH % world == 0
    local_b = GLOBAL_BATCH // world
    bn_group = dist.new_group() if a.sync_bn else None
    xtr, ytr = map(torch.from_numpy, mnist.load("train"))
    xte, yte = map(torch.from_numpy, mnist.load("test"))
    seeds = [int(s) for s in a.seeds.split(",") if s]
    tag = " sync-bn" if a.sync_bn else ""
    results = []
    for sd in seeds:
        t0 = time.perf_counter()
        model = ref_model.build_model(sd)
        if a.sync_bn:
            model = convert_sync_batchnorm_cpu(model, bn_group)
        ddp = DDP(model)
        opt = ref_model.make_optimizer(ddp)
        sampler = DistributedSampler(range(len(xtr)), num_replicas=world, rank=rank,
                                     shuffle=True, seed=sd, drop_last=False)
        spe = math.ceil(len(sampler) / local_b)  # 63 for W = 1, 2, 4 (8,000 images)
        total = EPOCHS * spe
        step = 0
        for ep in range(EPOCHS):
            sampler.set_epoch(ep)
            idx = torch.tensor(list(sampler))
            for i in range(0, len(idx), local_b):
                for pg in opt.param_groups:
                    pg["lr"] = lr_at(step, spe, total)
                j = idx[i:i + local_b]
                bench_single.train_step(ddp, opt, xtr[j], ytr[j])
                step += 1
        if rank == 0:
            acc, _ = bench_single.evaluate(ddp.module, xte, yte)
            results.append(acc * 100)
            print(f"ranks {world}{tag} seed {sd} acc {acc * 100:.2f}  "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
        dist.barrier()
    if rank == 0:
        report(world, results, tag)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--sync-bn", action="store_true", help="synchronised BatchNorm (W > 1)")
    a = ap.parse_args()
    if a.ranks == 1:
        if a.sync_bn:
            ap.error("--sync-bn needs --ranks > 1")
        single(a, [int(s) for s in a.seeds.split(",") if s])
    else:
        bench_util.launch(distributed, a, a.ranks)


if __name__ == "__main__":
    main()
