"""The PyTorch reference `gossipd bench --against torch` runs in the same run, on the
CPU or on a CUDA device: the same models (softmax 784-10, MLP 784-128-10
ReLU, and the layered presets lenet5 and leaf-cnn on 1×28×28 images, as
model/nn/spec.go writes them), plain SGD lr 0.1, cross-entropy, one shuffled pass per epoch, on
Fashion-MNIST scaled to [0, 1] (from $GOSSIPD_DATA_DIR, as gossipd reads it,
else /usr/share/datasets/fashion-mnist). It is ../shared/reference/torch_baseline.py
with a device and a batch size; it prints the same line.

Usage: python3 torch_reference.py [model] [epochs] [batch] [threads] [device]
model: softmax | mlp | lenet5 | leaf-cnn; device: cpu (default) or cuda[:N]. $GOSSIPD_TORCH_SEEDS
(default 1) trains that many models one after the other, from seeds 0, 1, …,
each printing its line. On CUDA the data
is on the device before the clock starts, a throwaway copy of the model
takes four steps first (the first call of each kernel loads it; gossipd
does the same), and the clock stops after torch.cuda.synchronize(), so
the figure is training alone. $GOSSIPD_TORCH_GRAPHS=1 (CUDA only)
captures each full minibatch's step (forward, backward, SGD step) once
as a CUDA graph (torch.cuda.graph, after three warm-up steps on a side
stream whose changes are undone) and replays it for every full minibatch,
the minibatch copied into the graph's input first; a last, smaller
minibatch steps eagerly.
"""
import gzip, os, struct, sys, time
import numpy as np
import torch


def data_dir():
    """Where gossipd looks: $GOSSIPD_DATA_DIR/fashion-mnist or the directory
    itself where it is set (and nowhere else), else Debian's
    dataset-fashion-mnist."""
    env = os.environ.get("GOSSIPD_DATA_DIR")
    if env:
        for d in (os.path.join(env, "fashion-mnist"), env):
            if os.path.exists(os.path.join(d, "train-images-idx3-ubyte.gz")):
                return d + "/"
        sys.exit("torch_reference: fashion-mnist not found in $GOSSIPD_DATA_DIR=" + env)
    return "/usr/share/datasets/fashion-mnist/"


D = data_dir()


def idx(path):
    with gzip.open(path) as f:
        magic, = struct.unpack(">I", f.read(4))
        nd = magic & 0xFF
        dims = struct.unpack(">" + "I" * nd, f.read(4 * nd))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else "mlp"
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    dev = torch.device(sys.argv[5] if len(sys.argv) > 5 else "cpu")
    torch.set_num_threads(threads)
    seeds = int(os.environ.get("GOSSIPD_TORCH_SEEDS", "1"))
    xtr = torch.tensor(idx(D + "train-images-idx3-ubyte.gz").reshape(-1, 784) / 255.0, dtype=torch.float32, device=dev)
    ytr = torch.tensor(idx(D + "train-labels-idx1-ubyte.gz").astype(np.int64), device=dev)
    xte = torch.tensor(idx(D + "t10k-images-idx3-ubyte.gz").reshape(-1, 784) / 255.0, dtype=torch.float32, device=dev)
    yte = torch.tensor(idx(D + "t10k-labels-idx1-ubyte.gz").astype(np.int64), device=dev)
    lossf = torch.nn.CrossEntropyLoss()
    n = xtr.shape[0]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    graphs = os.environ.get("GOSSIPD_TORCH_GRAPHS", "") == "1"
    if graphs and dev.type != "cuda":
        sys.exit("torch_reference: $GOSSIPD_TORCH_GRAPHS=1 needs a CUDA device, not " + str(dev))
    for seed in range(seeds):
        torch.manual_seed(seed)
        net = build(model).to(dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        if dev.type == "cuda" and seed == 0:
            # A few steps of a throwaway copy first, as gossipd warms up
            # on the GPU: the first call of each kernel loads it.
            import copy
            wnet = copy.deepcopy(net)
            wopt = torch.optim.SGD(wnet.parameters(), lr=0.01)
            for i in range(0, min(n, 4 * batch), batch):
                b = torch.arange(i, min(n, i + batch), device=dev)
                wopt.zero_grad()
                lossf(wnet(xtr[b]), ytr[b]).backward()
                wopt.step()
            sync()
        if graphs:
            step = capture(net, opt, lossf, batch, dev)
        for ep in range(epochs):
            perm = torch.randperm(n, device=dev)
            sync()
            t0 = time.perf_counter()
            for i in range(0, n, batch):
                b = perm[i:i + batch]
                if graphs and len(b) == batch:
                    step(xtr[b], ytr[b])
                    continue
                opt.zero_grad()
                loss = lossf(net(xtr[b]), ytr[b])
                loss.backward()
                opt.step()
            sync()
            dt = time.perf_counter() - t0
            with torch.no_grad():
                acc = (net(xte).argmax(1) == yte).float().mean().item()
            print(f"{model} epoch {ep+1} batch {batch} threads {threads} device {dev} seed {seed}: {n/dt:.0f} samples/s, test acc {acc:.4f}", flush=True)


def build(model):
    """The model named, taking rows of 784 values (the CNNs view them as
    1×28×28 images, as gossipd does)."""
    nn = torch.nn
    if model == "softmax":
        return nn.Linear(784, 10)
    if model == "mlp":
        return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    image = nn.Unflatten(1, (1, 28, 28))
    if model == "lenet5":
        return nn.Sequential(image, nn.Conv2d(1, 6, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    if model == "leaf-cnn":
        return nn.Sequential(image, nn.Conv2d(1, 32, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(3136, 2048), nn.ReLU(), nn.Linear(2048, 10))
    sys.exit("torch_reference: model " + model + ", want softmax, mlp, lenet5 or leaf-cnn")


def capture(net, opt, lossf, batch, dev):
    """Records one SGD step of net on a minibatch of batch rows as a CUDA
    graph (PyTorch's whole-network capture) and returns a function that
    copies a minibatch into the graph's inputs and replays it. The
    warm-up steps the capture needs run on the model itself, so its
    parameters are put back afterwards, in place (the graph holds their
    addresses); plain SGD has no other state."""
    import copy
    saved = copy.deepcopy(net.state_dict())
    x = torch.zeros(batch, 784, device=dev)
    y = torch.zeros(batch, dtype=torch.int64, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            lossf(net(x), y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        lossf(net(x), y).backward()
        opt.step()
    with torch.no_grad():
        net.load_state_dict(saved)

    def step(xb, yb):
        x.copy_(xb)
        y.copy_(yb)
        g.replay()
    return step


main()
