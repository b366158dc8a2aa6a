# Copied from the project's anchors (shared/anchors/mnist.py, measured 2026-11-22 on the 2-vCPU
# dev box, python3-torch 1.13.1 from Debian 12); changes: default folder is now
# <repo>/data/mnist-10k (found relative to this file, was ../datasets/mnist-10k of shared/);
# MNIST_DIR still overrides it. Reading and normalisation unchanged.
"""Minimal IDX (gzip) MNIST reader: no torchvision, no downloads.

Preprocessing (replicate exactly in C++):
    x = (pixel_uint8 / 255 - 0.1307) / 0.3081      float32, shape [N, 1, 28, 28]
    y = label as int64
"""
import gzip
import os
import struct

import numpy as np

DEFAULT_DIR = os.environ.get("MNIST_DIR") or os.path.join(  # unset or empty: the bundled set
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "mnist-10k")
MEAN, STD = 0.1307, 0.3081


def _read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    assert (magic >> 8) == 0x08, f"{path}: only uint8 IDX supported"
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return arr.reshape(dims)


def load(split="train", root=DEFAULT_DIR):
    """Returns (images float32 [N,1,28,28] normalized, labels int64 [N])."""
    prefix = "train" if split == "train" else "t10k"
    imgs = _read_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"))
    labs = _read_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (imgs.astype(np.float32) / 255.0 - MEAN) / STD
    return x[:, None, :, :].copy(), labs.astype(np.int64)


if __name__ == "__main__":
    for s in ("train", "test"):
        x, y = load(s)
        print(s, x.shape, x.dtype, y.shape, "class counts:", np.bincount(y))
