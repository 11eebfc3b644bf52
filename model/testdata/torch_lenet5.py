#!/usr/bin/env python3
"""Writes torch_lenet5.safetensors and torch_lenet5.json: LeNet-5 (the
lenet5 preset's layers as an nn.Sequential) trained by PyTorch for one
epoch on Fashion-MNIST scaled by 1/255 (gossipd's "global" scaling),
and how many of the 10,000 test images it classifies right, which
TestInitFromPyTorchLeNet5 checks gossipd's evaluation of the same
weights against. Run from this directory (Debian: apt install
python3-torch dataset-fashion-mnist):

    python3 torch_lenet5.py
"""
import gzip
import json
import struct

import numpy as np
import torch
from torch import nn

from torch_init import save

D = "/usr/share/datasets/fashion-mnist/"


def idx(path):
    with gzip.open(path) as f:
        magic, = struct.unpack(">I", f.read(4))
        dims = struct.unpack(">" + "I" * (magic & 0xFF), f.read(4 * (magic & 0xFF)))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    scale = np.float32(1 / 255)  # as gossipd computes it: x·(1/255) in float32
    xtr = torch.from_numpy(idx(D + "train-images-idx3-ubyte.gz").reshape(-1, 1, 28, 28).astype(np.float32) * scale)
    ytr = torch.from_numpy(idx(D + "train-labels-idx1-ubyte.gz").astype(np.int64))
    xte = torch.from_numpy(idx(D + "t10k-images-idx3-ubyte.gz").reshape(-1, 1, 28, 28).astype(np.float32) * scale)
    yte = torch.from_numpy(idx(D + "t10k-labels-idx1-ubyte.gz").astype(np.int64))
    net = nn.Sequential(nn.Conv2d(1, 6, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    lossf = nn.CrossEntropyLoss()
    perm = torch.randperm(len(ytr))
    for i in range(0, len(ytr), 32):
        b = perm[i:i + 32]
        opt.zero_grad()
        lossf(net(xtr[b]), ytr[b]).backward()
        opt.step()
    with torch.no_grad():
        pred = net(xte).argmax(1)
    correct = int((pred == yte).sum())
    save(net.state_dict(), "torch_lenet5.safetensors")
    json.dump({"torch": torch.__version__, "correct": correct, "examples": len(yte), "accuracy": correct / len(yte),
               "predictions": pred.tolist()}, open("torch_lenet5.json", "w"))


if __name__ == "__main__":
    main()
