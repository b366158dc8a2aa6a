"""AdamW and clip_grad_norm_ trajectories from PyTorch, for tests/ch09/test_adamw.cpp.

Run with Debian's python3-torch (torch 1.13, CPU):
    /usr/bin/python3 tests/data/adamw/make_adamw_fixture.py > tests/data/adamw/adamw_fixture.txt

Each case: three parameters of different shapes, seeded gradients for each step, the
optimizer's options, optionally clip_grad_norm_ before each step (its returned norm is
recorded), and one parameter without a gradient at one step (AdamW skips it). Floats are
written with 9 significant digits, which round-trip float32 exactly.
"""
import torch

SHAPES = [(4, 3), (5,), (2, 2, 3)]
STEPS = 6


def values(t):
    return " ".join("%.9g" % v for v in t.detach().reshape(-1).tolist())


def run(name, lr, beta1, beta2, eps, weight_decay, clip, skip, seed):
    gen = torch.Generator().manual_seed(seed)
    params = [torch.randn(s, generator=gen).requires_grad_() for s in SHAPES]
    opt = torch.optim.AdamW(params, lr=lr, betas=(beta1, beta2), eps=eps,
                            weight_decay=weight_decay, foreach=False)
    print("case %s %.17g %.17g %.17g %.17g %.17g %.17g %d %d"
          % (name, lr, beta1, beta2, eps, weight_decay, clip, STEPS, len(params)))
    for i, p in enumerate(params):
        print("shape %d %s" % (i, " ".join(str(d) for d in p.shape)))
        print("init %d %s" % (i, values(p)))
    for step in range(STEPS):
        for i, p in enumerate(params):
            g = torch.randn(p.shape, generator=gen) * (1.0 + step)
            if (step, i) == skip:
                p.grad = None
                print("grad %d %d none" % (step, i))
            else:
                p.grad = g
                print("grad %d %d %s" % (step, i, values(g)))
        if clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, clip)
            print("norm %d %.9g" % (step, float(norm)))
        opt.step()
        for i, p in enumerate(params):
            print("param %d %d %s" % (step, i, values(p)))
    print("end")


print("# AdamW trajectories from torch %s (torch.optim.AdamW, foreach=False; "
      "torch.nn.utils.clip_grad_norm_), made by make_adamw_fixture.py" % torch.__version__)
run("defaults", 1e-2, 0.9, 0.999, 1e-8, 1e-2, 0.0, (-1, -1), 1)
run("clipped", 3e-3, 0.8, 0.95, 1e-6, 0.1, 0.5, (3, 1), 2)
run("no_decay", 5e-2, 0.9, 0.99, 1e-8, 0.0, 2.0, (-1, -1), 3)
