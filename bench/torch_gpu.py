"""PyTorch on a GPU, the GPU side of bench_train_step and ddp-train: the reference model
and recipe of the anchors (bench/torch/ref_model.py, mnist.py), timed and trained on
cuda:0 as bench_single.py does on the CPU. There is no stored GPU anchor: run this beside
`bench_train_step --device cuda` on the same GPU, in the same session.

    python3 bench/torch_gpu.py [--anchors bench/torch] [--batches 64,128]
                               [--steps 50] [--warmup 10] [--seeds 0,1,2] [--epochs 5]

FP32 throughout (TF32 off in cuDNN and cuBLAS), as ddp.cpp computes. Step times wait for
the GPU before each clock reading. Some of cuDNN's backward kernels add with atomics, in
whatever order the threads arrive, so a seed's accuracy can differ between two runs on a
GPU (seen: seed 0 gave 89.70, 93.85 and 89.30 % on H100s).
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

ap = argparse.ArgumentParser()
here = os.path.dirname(os.path.abspath(__file__))
ap.add_argument("--anchors", default=os.path.join(here, "torch"),
                help="folder of the anchors' ref_model.py and mnist.py")
ap.add_argument("--data", default=os.path.join(here, "..", "data", "mnist-10k"))
ap.add_argument("--batches", default="64,128")
ap.add_argument("--steps", type=int, default=50)
ap.add_argument("--warmup", type=int, default=10)
ap.add_argument("--seeds", default="0,1,2", help="training runs; empty: none")
ap.add_argument("--epochs", type=int, default=5)
a = ap.parse_args()
sys.path.insert(0, a.anchors)
import mnist  # noqa: E402
import ref_model  # noqa: E402

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
xtr, ytr = (t.to(dev) for t in map(torch.from_numpy, mnist.load("train", a.data)))
xte, yte = (t.to(dev) for t in map(torch.from_numpy, mnist.load("test", a.data)))


def step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}, FP32 (TF32 off)")
for batch in [int(b) for b in a.batches.split(",") if b]:
    model = ref_model.build_model(0).to(dev)
    opt = ref_model.make_optimizer(model)
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, len(xtr), (a.warmup + a.steps, batch), generator=g).to(dev)
    times = []
    for i in range(a.warmup + a.steps):
        x, y = xtr[idx[i]], ytr[idx[i]]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(model, opt, x, y)
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"PyTorch step, batch {batch}: min {min(times) * 1e3:.2f} ms, median {med * 1e3:.2f} ms,"
          f" {batch / med:.0f} img/s", flush=True)

for seed in [int(s) for s in a.seeds.split(",") if s]:
    model = ref_model.build_model(seed).to(dev)  # the CPU draw of the anchors, then moved
    opt = ref_model.make_optimizer(model)
    g = torch.Generator().manual_seed(seed)
    batch = ref_model.HPARAMS["batch"]
    epoch_s = []
    for _ in range(a.epochs):
        perm = torch.randperm(len(xtr), generator=g).to(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(0, len(xtr), batch):
            j = perm[i:i + batch]
            step(model, opt, xtr[j], ytr[j])
        torch.cuda.synchronize()
        epoch_s.append(time.perf_counter() - t0)
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xte), 500):
            correct += (model(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum().item()
    print(f"PyTorch seed {seed}: test accuracy {100 * correct / len(xte):.2f}% after"
          f" {a.epochs} epochs; epoch s {' '.join(f'{e:.3f}' for e in epoch_s)}", flush=True)
