#!/usr/bin/env python3
"""Writes torch_vectors.json: PyTorch's outputs, loss, gradients and
per-example gradients for small networks of every layer kind and for the
presets, which model/nn's tests check the Go code against (no PyTorch at
test time). Run once after a change of the cases:

    python3 model/nn/testdata/torch_vectors.py > model/nn/testdata/torch_vectors.json

(Debian: apt install python3-torch). The parameters and inputs are not
random: both sides compute them from the same formulas (params below,
and paramsFor and inputsFor in vectors_test.go), rounded to float32;
PyTorch then computes in float64, so the vectors are the exact values
that the float32 Go code approximates.
"""
import json
import math
import sys

import numpy as np
import torch
from torch import nn

# Each case: name, spec, input shape (C, H, W), classes, examples.
CASES = [
    ("dense", "dense:5,relu,dense", (6, 1, 1), 3, 4),
    ("conv", "conv:3:3,relu,flatten,dense", (2, 6, 6), 4, 3),
    ("conv-stride-pad", "conv:4:3:2:1,tanh,flatten,dense", (2, 7, 7), 3, 3),
    ("maxpool", "conv:2:3:1:1,maxpool:2,flatten,dense", (1, 6, 6), 3, 3),
    ("maxpool-stride", "conv:2:1,maxpool:3:2,flatten,dense", (2, 7, 7), 3, 2),
    ("avgpool-gelu", "conv:3:3,avgpool:2,gelu,flatten,dense", (1, 8, 8), 3, 3),
    ("gelu", "dense:7,gelu,dense", (5, 1, 1), 3, 4),
    ("layernorm-conv", "conv:3:3,layernorm,relu,flatten,dense", (1, 6, 6), 3, 3),
    ("layernorm-dense", "dense:6,layernorm,tanh,dense", (5, 1, 1), 3, 4),
    ("groupnorm", "conv:4:3,groupnorm:2,relu,flatten,dense", (1, 6, 6), 3, 3),
    ("dropout-eval", "dense:6,dropout:0.5,relu,dense", (5, 1, 1), 3, 4),
    ("lenet5", "lenet5", (1, 28, 28), 10, 2),
    ("leaf-cnn", "leaf-cnn", (1, 28, 28), 62, 2),
    ("small-cnn", "small-cnn", (1, 8, 8), 10, 3),
]

PRESETS = {
    "lenet5": "conv:6:5:1:2,relu,maxpool:2,conv:16:5,relu,maxpool:2,flatten,dense:120,relu,dense:84,relu,dense",
    "leaf-cnn": "conv:32:5:1:2,relu,maxpool:2,conv:64:5:1:2,relu,maxpool:2,flatten,dense:2048,relu,dense",
    "small-cnn": "conv:8:3:1:1,relu,maxpool:2,conv:16:3:1:1,relu,maxpool:2,flatten,dense:32,relu,dense",
}

# At most this many gradient entries per case are written (evenly
# spread, always including each tensor's first and last).
MAX_ENTRIES = 4000


def build(spec, shape, classes):
    """The nn.Sequential of spec and each parameter's fan-in."""
    c, h, w = shape
    mods, fan = [], {}
    for i, f in enumerate(PRESETS.get(spec, spec).split(",")):
        p = f.split(":")
        k, a = p[0], [float(x) if "." in x else int(x) for x in p[1:]]
        if k == "dense":
            out = a[0] if a else classes
            mods.append(nn.Linear(c, out))
            fan[i], c = c, out
        elif k == "conv":
            out, kern = a[0], a[1]
            stride = a[2] if len(a) > 2 else 1
            pad = a[3] if len(a) > 3 else 0
            mods.append(nn.Conv2d(c, out, kern, stride, pad))
            fan[i] = c * kern * kern
            c, h, w = out, (h + 2 * pad - kern) // stride + 1, (w + 2 * pad - kern) // stride + 1
        elif k in ("maxpool", "avgpool"):
            kern = a[0]
            stride = a[1] if len(a) > 1 else kern
            mods.append((nn.MaxPool2d if k == "maxpool" else nn.AvgPool2d)(kern, stride))
            h, w = (h - kern) // stride + 1, (w - kern) // stride + 1
        elif k == "flatten":
            mods.append(nn.Flatten())
            c, h, w = c * h * w, 1, 1
        elif k == "relu":
            mods.append(nn.ReLU())
        elif k == "tanh":
            mods.append(nn.Tanh())
        elif k == "gelu":
            mods.append(nn.GELU())
        elif k == "dropout":
            mods.append(nn.Dropout(a[0]))
        elif k == "layernorm":
            mods.append(nn.LayerNorm([c, h, w] if h * w > 1 else [c]))
            fan[i] = 0
        elif k == "groupnorm":
            mods.append(nn.GroupNorm(a[0], c))
            fan[i] = 0
        else:
            raise ValueError(k)
    return nn.Sequential(*mods), fan


def params(k, size, fan_in, is_weight):
    """Parameter tensor k's values (float32): see paramsFor."""
    s = np.sin(1.0 + 0.7 * np.arange(size, dtype=np.float64) + 0.3 * k)
    if fan_in == 0:
        return (1.0 + 0.1 * s if is_weight else 0.1 * s).astype(np.float32)
    return (s / math.sqrt(fan_in)).astype(np.float32)


def inputs(size):
    """The examples' values (float32): see inputsFor."""
    return np.cos(0.37 * np.arange(size, dtype=np.float64) + 0.1).astype(np.float32)


def entries(sizes):
    """The flat indices written: every entry of a small network, else
    an even spread over each tensor with its first and last."""
    total = sum(sizes)
    if total <= MAX_ENTRIES:
        return list(range(total))
    out, off = [], 0
    for n in sizes:
        k = max(2, MAX_ENTRIES * n // total)
        out += sorted({off + (j * (n - 1)) // (k - 1) for j in range(k)})
        off += n
    return out


def case(name, spec, shape, classes, m):
    torch.set_default_dtype(torch.float64)
    model, fan = build(spec, shape, classes)
    model.eval()  # dropout passes values through
    names, sizes, shapes = [], [], []
    with torch.no_grad():
        for k, (pname, t) in enumerate(model.named_parameters()):
            layer = int(pname.split(".")[0])
            v = params(k, t.numel(), fan[layer], pname.endswith("weight"))
            t.copy_(torch.from_numpy(v.astype(np.float64)).reshape(t.shape))
            names.append(pname)
            sizes.append(t.numel())
            shapes.append(list(t.shape))
    d = shape[0] * shape[1] * shape[2]
    x = torch.from_numpy(inputs(m * d).astype(np.float64)).reshape(m, *shape)
    if shape[1] * shape[2] == 1:
        x = x.reshape(m, d)
    y = torch.tensor([(7 * e + 3) % classes for e in range(m)])
    idx = entries(sizes)

    def flat_grad():
        return torch.cat([p.grad.reshape(-1) for p in model.parameters()])[idx].tolist()

    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y, reduction="mean")
    model.zero_grad()
    loss.backward()
    grad = flat_grad()
    per = []
    for e in range(m):
        model.zero_grad()
        nn.functional.cross_entropy(model(x[e:e + 1]), y[e:e + 1], reduction="sum").backward()
        per.append(flat_grad())
    return {
        "name": name, "spec": spec, "input": list(shape), "classes": classes, "examples": m,
        "params": names, "sizes": sizes, "shapes": shapes,
        "logits": logits.detach().reshape(-1).tolist(), "loss": loss.item(),
        "index": idx, "grad": grad, "per_example": per,
    }


def main():
    out = {"torch": torch.__version__, "cases": [case(*c) for c in CASES]}
    json.dump(out, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
