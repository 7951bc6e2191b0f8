#!/usr/bin/python3
# Writes baseline_torch.txt, the losses PyTorch gets on the integration test's baseline job, with
# Debian's python3-torch (run from the repository root after building):
#   /usr/bin/python3 tests/integration/make_baseline_fixture.py build/tools/gen-dctaxi tests/integration
# The job: gen-dctaxi --rows 200000 --partitions 4 (seed 0), label column 0, float64,
# w (8,1) and b (1,1) by kaiming_uniform_ after torch.manual_seed(0), X @ w + b, mse_loss,
# clip_grad_norm_(0.5), SGD lr 0.03, batch 65536 read in partition order, a short batch at the end
# of each epoch, 50 iterations ("loss"); and the same with torch.optim.Adam(lr=0.1) and no
# clipping ("adam_loss"). Format: "name 50 v0 v1 ...", values as %.17g.
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

gen, out = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([gen, "--rows", "200000", "--partitions", "4", tmp], check=True)
    data = np.concatenate([np.loadtxt(f, delimiter=",", ndmin=2)
                           for f in sorted(glob.glob(os.path.join(tmp, "part*.csv")))])

batch_size, n = 65536, len(data)


def train(make_opt, clip):
    torch.manual_seed(0)
    w = torch.nn.init.kaiming_uniform_(torch.empty(8, 1, dtype=torch.float64, requires_grad=True))
    b = torch.nn.init.kaiming_uniform_(torch.empty(1, 1, dtype=torch.float64, requires_grad=True))
    opt = make_opt([w, b])
    losses, pos = [], 0
    for it in range(50):
        if pos >= n:
            pos = 0
        batch = torch.tensor(data[pos:min(pos + batch_size, n)])
        pos += len(batch)
        X, y = batch[:, 1:], batch[:, 0]
        loss = torch.nn.functional.mse_loss((X @ w + b).squeeze(), y)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_([w, b], clip)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


with open(os.path.join(out, "baseline_torch.txt"), "w") as f:
    for name, losses in (("loss", train(lambda p: torch.optim.SGD(p, lr=0.03), 0.5)),
                         ("adam_loss", train(lambda p: torch.optim.Adam(p, lr=0.1), None))):
        f.write("%s %d " % (name, len(losses)) + " ".join("%.17g" % v for v in losses) + "\n")
