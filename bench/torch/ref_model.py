# Copied from the project's anchors (shared/anchors/ref_model.py, measured 2026-11-22 on the
# 2-vCPU dev box, python3-torch 1.13.1 from Debian 12); changes: usage paths in the docstring only
# (anchors/ -> bench/torch/); since 2026-11-26 a width multiplier K (RefNet(width=K),
# build_model(seed, width=K), --width K), which at K = 1 builds the same model, in the same
# order, with the same initial values.
"""Reference "ResNet-style MNIST net" (the model the C++ project must replicate).

    /usr/bin/python3 bench/torch/ref_model.py                 # print params + FLOPs
    /usr/bin/python3 bench/torch/ref_model.py --export-init DIR  # dump seeded init weights
    /usr/bin/python3 bench/torch/ref_model.py --width 4          # every layer's channels x 4

Architecture (float32, NCHW, input [N,1,28,28] normalized as in mnist.py):
    stem   : conv3x3(1->16, s1, p1, no bias) -> BN(16) -> ReLU              28x28
    block1 : BasicBlock(16->16, stride 1, identity shortcut)                28x28
    block2 : BasicBlock(16->32, stride 2, shortcut conv1x1 s2 + BN)         14x14
    block3 : BasicBlock(32->64, stride 2, shortcut conv1x1 s2 + BN)          7x7
    head   : global average pool -> Linear(64->10, with bias)
  Width K multiplies every channel count by K (16K, 32K, 64K; fc 64K -> 10), as ddp.cpp's
  `--width K` does; K = 1 is the net above.
  BasicBlock(cin->cout, s):
    out = ReLU(BN(conv3x3(cin->cout, stride s, pad 1, no bias)(x)))
    out = BN(conv3x3(cout->cout, stride 1, pad 1, no bias)(out))
    out = ReLU(out + shortcut(x))
  BN: PyTorch defaults (eps 1e-5, momentum 0.1, affine, track running stats;
      batch stats with biased var in training, running stats in eval;
      running var is updated with the unbiased batch var).
  Init: PyTorch defaults (conv/linear: kaiming_uniform_(a=sqrt(5)),
        linear bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)); BN weight=1, bias=0),
        drawn after torch.manual_seed(seed). Use --export-init to get the exact
        tensors for bit-comparable experiments.
Training recipe (HPARAMS): mean cross-entropy, SGD(lr 0.1, momentum 0.9,
  dampening 0, nesterov False, weight_decay 5e-4 applied to ALL parameters incl.
  BN/bias, PyTorch SGD form: v = m*v + (g + wd*w); w -= lr*v), constant lr,
  batch 128, reshuffle every epoch, last partial batch kept (8000 = 62*128 + 64).
"""
import argparse
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

HPARAMS = dict(lr=0.1, momentum=0.9, weight_decay=5e-4, batch=128, seed=0)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, 0, bias=False),
                nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class RefNet(nn.Module):
    def __init__(self, width=1):
        super().__init__()
        c1, c2, c3 = 16 * width, 32 * width, 64 * width
        self.conv = nn.Conv2d(1, c1, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(c1)
        self.block1 = BasicBlock(c1, c1, 1)
        self.block2 = BasicBlock(c1, c2, 2)
        self.block3 = BasicBlock(c2, c3, 2)
        self.fc = nn.Linear(c3, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = self.block3(self.block2(self.block1(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def build_model(seed=HPARAMS["seed"], width=1):
    torch.manual_seed(seed)
    return RefNet(width)


def make_optimizer(model, lr=None):
    return torch.optim.SGD(model.parameters(), lr=HPARAMS["lr"] if lr is None else lr,
                           momentum=HPARAMS["momentum"],
                           weight_decay=HPARAMS["weight_decay"])


def count_params(model):
    return sum(p.numel() for p in model.parameters())


# ---- analytic multiply-add count (conv + linear only; BN/ReLU/add/pool not counted)
def analytic_macs(h=28, w=28, width=1):
    """Per-image forward MACs, computed from the architecture, not from hooks."""
    layers = []
    c1, c2, c3 = 16 * width, 32 * width, 64 * width

    def conv(name, cin, cout, k, s, p, h, w):
        ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        layers.append((name, ho * wo * cout * cin * k * k))
        return ho, wo

    h1, w1 = conv(f"stem.conv3x3 1->{c1}", 1, c1, 3, 1, 1, h, w)
    for name, cin, cout, s in (("block1", c1, c1, 1), ("block2", c1, c2, 2),
                               ("block3", c2, c3, 2)):
        ho, wo = conv(f"{name}.conv1 3x3 {cin}->{cout} s{s}", cin, cout, 3, s, 1, h1, w1)
        conv(f"{name}.conv2 3x3 {cout}->{cout}", cout, cout, 3, 1, 1, ho, wo)
        if s != 1 or cin != cout:
            conv(f"{name}.shortcut 1x1 {cin}->{cout} s{s}", cin, cout, 1, s, 0, h1, w1)
        h1, w1 = ho, wo
    layers.append((f"fc {c3}->10", c3 * 10))
    return layers


def hook_macs(model):
    """Cross-check: MACs from actual output shapes via forward hooks."""
    total = [0]

    def hook(m, inp, out):
        if isinstance(m, nn.Conv2d):
            total[0] += out[0].numel() * m.in_channels * m.kernel_size[0] * m.kernel_size[1] // m.groups
        elif isinstance(m, nn.Linear):
            total[0] += m.in_features * m.out_features
    hs = [m.register_forward_hook(hook) for m in model.modules()
          if isinstance(m, (nn.Conv2d, nn.Linear))]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 1, 28, 28))
    for h in hs:
        h.remove()
    return total[0]


def summary(width=1):
    model = build_model(width=width)
    layers = analytic_macs(width=width)
    macs = sum(m for _, m in layers)
    assert macs == hook_macs(model), "analytic MAC count disagrees with hooks"
    return dict(
        width=width,
        params=count_params(model),
        params_by_tensor={k: v.numel() for k, v in model.named_parameters()},
        buffers_float=sum(b.numel() for b in model.buffers() if b.is_floating_point()),
        fwd_macs_per_image=macs,
        fwd_flops_per_image=2 * macs,
        train_flops_per_image_approx=3 * 2 * macs,  # fwd + bwd(dX, dW) ~ 3x fwd
        layers=[dict(name=n, macs=m) for n, m in layers],
        hparams=HPARAMS,
    )


def export_state(model, out_dir):
    """state_dict -> <out_dir>/init.bin (float32 LE, concatenated) + init.json manifest.
    Integer buffers (num_batches_tracked) are skipped."""
    os.makedirs(out_dir, exist_ok=True)
    manifest, off = [], 0
    with open(os.path.join(out_dir, "init.bin"), "wb") as f:
        for k, v in model.state_dict().items():
            if not v.is_floating_point():
                continue
            a = v.detach().contiguous().to(torch.float32).numpy()
            f.write(a.astype("<f4").tobytes())
            manifest.append(dict(name=k, shape=list(a.shape), offset=off, count=a.size))
            off += a.size
    with open(os.path.join(out_dir, "init.json"), "w") as f:
        json.dump(dict(seed=HPARAMS["seed"], dtype="float32", tensors=manifest), f, indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write summary JSON here")
    ap.add_argument("--export-init", metavar="DIR")
    ap.add_argument("--width", type=int, default=1, help="channel multiplier K (default 1)")
    a = ap.parse_args()
    if a.width < 1:
        ap.error(f"--width expects an integer >= 1, got {a.width}")
    s = summary(a.width)
    at = f" at width {a.width}" if a.width != 1 else ""
    print(f"parameters{at}: {s['params']:,}  (+{s['buffers_float']} float BN buffers)")
    for l in s["layers"]:
        print(f"  {l['name']:<34s} {l['macs']:>10,d} MACs")
    print(f"forward MACs/image : {s['fwd_macs_per_image']:,}")
    print(f"forward FLOPs/image: {s['fwd_flops_per_image']:,} (= 2*MACs)")
    print(f"train FLOPs/image  : ~{s['train_flops_per_image_approx']:,} (~3x forward)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=1)
    if a.export_init:
        export_state(build_model(width=a.width), a.export_init)
        print("exported init weights to", a.export_init)
