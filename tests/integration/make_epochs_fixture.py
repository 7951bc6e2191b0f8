#!/usr/bin/python3
# Writes epochs_torch.txt and init_linear.safetensors, PyTorch's side of test_epochs.c, with Debian's
# python3-torch (run from the repository root after building):
#   /usr/bin/python3 tests/integration/make_epochs_fixture.py build/tools/gen-dctaxi tests/integration
# The data: gen-dctaxi --rows 2000 --partitions 3 (seed 0), label column 0, float64, read in
# partition order by a DataLoader(batch_size=300, shuffle=False): 7 batches an epoch (the last of
# 200 rows), 6 with drop_last=True. The model: w (8,1), b (1,1), X @ w + b, mse_loss.
# Records ("name count v0 v1 ...", %.17g):
#   epochs3            losses of 3 epochs: kaiming_uniform_ after torch.manual_seed(0), SGD lr 0.03,
#                      clip_grad_norm_(0.5)
#   epochs3_drop_last  the same with drop_last=True
#   epochs3_w, _b      the parameters after epochs3
#   from_job           1 epoch from epochs3's final parameters (load_state_dict), a fresh
#                      Adam(lr=0.1), no clipping
#   from_file          1 epoch from init_linear.safetensors (float32 values, loaded into the
#                      float64 model), SGD lr 0.03, clip 0.5
# init_linear.safetensors is written by tests/fixtures/safetensors_ref.py's independent writer.
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import safetensors_ref  # noqa: E402

gen, out = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([gen, "--rows", "2000", "--partitions", "3", tmp], check=True)
    data = torch.tensor(np.concatenate([np.loadtxt(f, delimiter=",", ndmin=2)
                                        for f in sorted(glob.glob(os.path.join(tmp, "part*.csv")))]))
BATCH = 300


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(8, 1, dtype=torch.float64))
        self.b = torch.nn.Parameter(torch.empty(1, 1, dtype=torch.float64))

    def forward(self, x):
        return x @ self.w + self.b


def train(model, opt, epochs, clip, drop_last=False):
    losses = []
    loader = DataLoader(TensorDataset(data), batch_size=BATCH, shuffle=False, drop_last=drop_last)
    for _ in range(epochs):
        for (batch,) in loader:
            X, y = batch[:, 1:], batch[:, 0]
            loss = torch.nn.functional.mse_loss(model(X).squeeze(), y)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    return losses


def seeded():
    torch.manual_seed(0)
    m = Linear()
    torch.nn.init.kaiming_uniform_(m.w)
    torch.nn.init.kaiming_uniform_(m.b)
    return m


records = []
a = seeded()
records.append(("epochs3", train(a, torch.optim.SGD(a.parameters(), lr=0.03), 3, 0.5)))
records.append(("epochs3_w", a.w.detach().reshape(-1).tolist()))
records.append(("epochs3_b", a.b.detach().reshape(-1).tolist()))
d = seeded()
records.append(("epochs3_drop_last", train(d, torch.optim.SGD(d.parameters(), lr=0.03), 3, 0.5, True)))

b = Linear()
b.load_state_dict(a.state_dict())
records.append(("from_job", train(b, torch.optim.Adam(b.parameters(), lr=0.1), 1, None)))

rng = np.random.default_rng(5)
w32 = (rng.standard_normal((8, 1)) * 0.05).astype(np.float32)
b32 = (rng.standard_normal((1, 1)) * 3).astype(np.float32)
safetensors_ref.write(os.path.join(out, "init_linear.safetensors"), [("b", b32), ("w", w32)],
                      {"format": "pt", "written_by": "make_epochs_fixture.py"})
f = Linear()
f.load_state_dict({"w": torch.from_numpy(w32), "b": torch.from_numpy(b32)})  # copy_ converts to float64
records.append(("from_file", train(f, torch.optim.SGD(f.parameters(), lr=0.03), 1, 0.5)))

with open(os.path.join(out, "epochs_torch.txt"), "w") as fh:
    for name, vals in records:
        fh.write("%s %d " % (name, len(vals)) + " ".join("%.17g" % v for v in vals) + "\n")
