"""Predicts with a gossipd model exported as safetensors, using NumPy only.

Usage: python3 predict_safetensors.py MODEL.safetensors FEATURES.json
FEATURES.json holds a list of raw feature vectors; the scaler stored in the
file's metadata is applied first. Prints {"classes": [...], "probabilities": [[...]]}.
"""
import json
import struct
import sys

import numpy as np


def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        lo, hi = e["data_offsets"]
        assert e["dtype"] == "F32", e["dtype"]
        tensors[name] = np.frombuffer(data[lo:hi], dtype="<f4").reshape(e["shape"])
    return tensors, meta


def main():
    tensors, meta = load(sys.argv[1])
    x = np.array(json.load(open(sys.argv[2])), dtype=np.float32)
    if "scaler" in meta:
        sc = json.loads(meta["scaler"])
        x = (x - np.array(sc["Shift"], dtype=np.float32)) * np.array(sc["Mul"], dtype=np.float32)
    layers = sum(1 for k in tensors if k.endswith(".weight"))
    a = x
    for l in range(1, layers + 1):
        z = a @ tensors[f"fc{l}.weight"].T + tensors[f"fc{l}.bias"]
        a = np.maximum(z, 0) if l < layers else z
    p = np.exp(a - a.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    print(json.dumps({"classes": p.argmax(axis=1).tolist(), "probabilities": p.tolist()}))


main()
