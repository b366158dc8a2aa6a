# Copied from the project's anchors (shared/anchors/fixtures/make_resnet_fixture.py, which made
# tests/data/resnet_mnist); changes: the docstring's paths, and ref_model and mnist are imported
# from this folder. Checked 2026-11-26: it writes that fixture again byte for byte.
"""Export a PyTorch parity fixture for the ResNet-style MNIST net.

    /usr/bin/python3 bench/torch/make_resnet_fixture.py tests/data/resnet_mnist

Writes tensors.bin (float32 little-endian, concatenated), tensors.txt (one line per
tensor: NAME SHAPE OFFSET, shape comma-separated, offset in floats), labels.txt.
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn.functional as F
import ref_model, mnist

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

x_all, y_all = mnist.load("train")
x = torch.from_numpy(x_all[:16]).contiguous()
y = torch.from_numpy(y_all[:16])

model = ref_model.build_model(seed=0)
opt = ref_model.make_optimizer(model)
records = []

def rec(name, t):
    records.append((name, t.detach().to(torch.float32).contiguous().clone()))

for k, v in model.state_dict().items():
    if v.is_floating_point():
        rec("init/" + k, v)
rec("batch/x", x)

model.train()
logits = model(x)
loss = F.cross_entropy(logits, y)
rec("step0/logits", logits)
rec("step0/loss", loss.reshape(1))
opt.zero_grad()
loss.backward()
for k, p in model.named_parameters():
    rec("step0/grad/" + k, p.grad)
opt.step()
for _ in range(2):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
for k, v in model.state_dict().items():
    if v.is_floating_point():
        rec("after3/" + k, v)
model.eval()
with torch.no_grad():
    rec("after3/eval_logits", model(x))

off = 0
with open(os.path.join(out, "tensors.bin"), "wb") as fb, open(os.path.join(out, "tensors.txt"), "w") as ft:
    ft.write("# name shape offset_in_floats  (float32 little-endian in tensors.bin)\n")
    for name, t in records:
        a = t.numpy().astype("<f4")
        fb.write(a.tobytes())
        ft.write(f"{name} {','.join(str(d) for d in a.shape) or '1'} {off}\n")
        off += a.size
with open(os.path.join(out, "labels.txt"), "w") as f:
    f.write(" ".join(str(int(v)) for v in y) + "\n")
print("wrote", len(records), "tensors,", off, "floats to", out, "; loss0 =", float(loss))
