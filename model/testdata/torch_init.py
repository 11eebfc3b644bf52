#!/usr/bin/env python3
"""Writes torch_init.safetensors and torch_init.json: the state_dict of a
small CNN initialised by PyTorch (seed 0), in the safetensors format
that safetensors.torch.save_file writes (an 8-byte little-endian header
length, a JSON header of dtype, shape and data offsets per tensor plus
"__metadata__": {"format": "pt"}, then the raw little-endian data), and
the logits PyTorch computes with it for four inputs, which
TestInitFromPyTorch checks gossipd's --init-from against. Run from this
directory (Debian: apt install python3-torch):

    python3 torch_init.py
"""
import json
import struct

import numpy as np
import torch
from torch import nn

SPEC = "conv:8:3:1:1,relu,maxpool:2,flatten,dense:32,relu,dense"


def save(sd, path):
    """safetensors.torch.save_file's format: header length, JSON header,
    little-endian data."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in sd.items():
        b = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(128, 32), nn.ReLU(), nn.Linear(32, 10))
    save(net.state_dict(), "torch_init.safetensors")
    x = np.cos(0.37 * np.arange(4 * 64, dtype=np.float64) + 0.1).astype(np.float32)
    with torch.no_grad():
        logits = net(torch.from_numpy(x).reshape(4, 1, 8, 8))
    json.dump({"torch": torch.__version__, "spec": SPEC, "logits": logits.reshape(-1).tolist()}, open("torch_init.json", "w"))


if __name__ == "__main__":
    main()
