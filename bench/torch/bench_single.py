# Copied from the project's anchors (shared/anchors/bench_single.py, measured 2026-11-22 on the
# 2-vCPU dev box, python3-torch 1.13.1 from Debian 12); changes: usage path in the docstring only
# (anchors/ -> bench/torch/, results/ -> bench/torch/results/); code unchanged.
"""Item 2: single-process PyTorch (CPU) anchors for the reference model.

    /usr/bin/python3 bench/torch/bench_single.py --threads 2 --out bench/torch/results/single_t2.json

(a) step timing: batches 64 and 128, `--warmup` untimed steps then `--steps`
    individually timed steps (forward + backward + SGD step; the batch gather
    is outside the timed region), fresh seeded model per batch size.
(b) training: `--epochs` epochs at batch 128 from seed `--seed`; per-epoch wall
    time (everything inside the epoch loop incl. batch gather and loss.item();
    evaluation excluded) and test accuracy on the 2000 test images after
    every epoch (eval mode, BN running statistics).
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_util  # noqa: E402
import mnist  # noqa: E402
import ref_model  # noqa: E402


def train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def evaluate(model, x, y, bs=500):
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(x), bs):
            out = model(x[i:i + bs])
            loss += F.cross_entropy(out, y[i:i + bs], reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + bs]).sum().item()
    model.train()
    return correct / len(x), loss / len(x)


def time_steps(xtr, ytr, batch, warmup, steps, seed):
    model = ref_model.build_model(seed)
    opt = ref_model.make_optimizer(model)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, len(xtr), (warmup + steps, batch), generator=g)
    times = []
    for i in range(warmup + steps):
        x, y = xtr[idx[i]], ytr[idx[i]]
        t0 = time.perf_counter()
        train_step(model, opt, x, y)
        dt = time.perf_counter() - t0
        if i >= warmup:
            times.append(dt)
    st = bench_util.stats(times)
    st["images_per_s_at_median"] = batch / st["median"]
    st["images_per_s_at_min"] = batch / st["min"]
    return st


def train(xtr, ytr, xte, yte, epochs, batch, seed):
    model = ref_model.build_model(seed)
    opt = ref_model.make_optimizer(model)
    g = torch.Generator().manual_seed(seed)
    log = []
    for ep in range(1, epochs + 1):
        perm = torch.randperm(len(xtr), generator=g)
        t0 = time.perf_counter()
        tot, nb = 0.0, 0
        for i in range(0, len(xtr), batch):
            j = perm[i:i + batch]
            tot += train_step(model, opt, xtr[j], ytr[j]).item()
            nb += 1
        t_ep = time.perf_counter() - t0
        t1 = time.perf_counter()
        acc, tl = evaluate(model, xte, yte)
        t_ev = time.perf_counter() - t1
        log.append(dict(epoch=ep, epoch_s=t_ep, steps=nb, train_loss=tot / nb,
                        test_acc=acc, test_loss=tl, eval_s=t_ev))
        print(f"  epoch {ep}: {t_ep:.2f}s  train_loss {tot / nb:.4f}  "
              f"test_acc {acc * 100:.2f}%  (eval {t_ev:.2f}s)", flush=True)
    return log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="64,128")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50, help="0 = skip step timing")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=ref_model.HPARAMS["seed"])
    ap.add_argument("--extra-seeds", default="",
                    help="comma list: extra training runs, to show seed-to-seed spread")
    ap.add_argument("--out")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    xtr, ytr = map(torch.from_numpy, mnist.load("train"))
    xte, yte = map(torch.from_numpy, mnist.load("test"))
    flops = ref_model.summary()["train_flops_per_image_approx"]
    res = dict(bench="single_process", threads=a.threads, machine=bench_util.machine(),
               torch=bench_util.torch_info(), cpu_before=bench_util.cpu_busy_fraction(),
               cpu_start_stat=bench_util.proc_stat(),
               args=vars(a), step_timing={}, train={})

    for b in ([int(v) for v in a.batches.split(",") if v] if a.steps > 0 else []):
        st = time_steps(xtr, ytr, b, a.warmup, a.steps, a.seed)
        st["approx_train_gflops_at_median"] = flops * st["images_per_s_at_median"] / 1e9
        res["step_timing"][str(b)] = st
        print(f"threads={a.threads} batch={b}: step min {st['min'] * 1e3:.1f} ms, "
              f"median {st['median'] * 1e3:.1f} ms ({st['n']} steps), "
              f"{st['images_per_s_at_median']:.0f} img/s", flush=True)

    if a.epochs > 0:
        b = ref_model.HPARAMS["batch"]
        log = train(xtr, ytr, xte, yte, a.epochs, b, a.seed)
        ep_times = [e["epoch_s"] for e in log]
        res["train"] = dict(batch=b, seed=a.seed, epochs=log,
                            epoch_s=bench_util.stats(ep_times),
                            epoch_s_excl_first=bench_util.stats(ep_times[1:]) if len(log) > 1 else None,
                            test_acc_by_epoch={e["epoch"]: e["test_acc"] for e in log})
        extra = {}
        for sd in [int(v) for v in a.extra_seeds.split(",") if v]:
            print(f"extra seed {sd}:", flush=True)
            lg = train(xtr, ytr, xte, yte, a.epochs, b, sd)
            extra[str(sd)] = dict(test_acc_by_epoch={e["epoch"]: e["test_acc"] for e in lg},
                                  epoch_s=[e["epoch_s"] for e in lg], epochs=lg)
        res["train"]["extra_seeds"] = extra
    res["cpu_after_loadavg"] = os.getloadavg()
    res["steal_frac_during_run"] = bench_util.steal_since(res["cpu_start_stat"])
    bench_util.write_json(a.out, res)


if __name__ == "__main__":
    main()
