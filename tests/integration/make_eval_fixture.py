#!/usr/bin/python3
# Writes eval_torch.txt, the test-set losses PyTorch gets for the integration tests' eval job, with
# Debian's python3-torch (run from the repository root after building):
#   /usr/bin/python3 tests/integration/make_eval_fixture.py build/tools/gen-dctaxi tests/integration
# The job: train on gen-dctaxi --rows 20000 --partitions 2 (seed 0), test on gen-dctaxi --rows 10000
# --partitions 3 --seed 1; label column 0, float64, w (8,1) and b (1,1) by kaiming_uniform_ after
# torch.manual_seed(0), X @ w + b, mse_loss, clip_grad_norm_(0.5), SGD lr 0.03, batch 4096 read in
# partition order with a short batch at the end of each epoch, 23 iterations, eval_every 5.
# After iterations 4, 9, 14, 19 and 22 (the last) the model is evaluated under torch.no_grad() on
# the whole test set in batches of 4096 in file order (4096, 4096, 1808 rows): the mean of the
# per-row squared errors, each batch's mean_loss weighted by its rows.
# Records, "name count v0 v1 ...", values as %.17g:
#   eval_iterations  the iterations after which an evaluation ran
#   eval_loss        the test-set loss after each of them
#   loss             the training loss of every iteration (a cross-check of the job itself)
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

gen, out = sys.argv[1], sys.argv[2]


def load(rows, parts, seed):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([gen, "--rows", str(rows), "--partitions", str(parts), "--seed", str(seed), tmp],
                       check=True)
        return np.concatenate([np.loadtxt(f, delimiter=",", ndmin=2)
                               for f in sorted(glob.glob(os.path.join(tmp, "part*.csv")))])


train, test = load(20000, 2, 0), load(10000, 3, 1)
batch_size, iterations, eval_every = 4096, 23, 5


def evaluate(w, b):
    total, n = 0.0, len(test)
    with torch.no_grad():
        for pos in range(0, n, batch_size):
            batch = torch.tensor(test[pos:pos + batch_size])
            X, y = batch[:, 1:], batch[:, 0]
            total += torch.nn.functional.mse_loss((X @ w + b).squeeze(1), y).item() * len(batch)
    return total / n


torch.manual_seed(0)
w = torch.nn.init.kaiming_uniform_(torch.empty(8, 1, dtype=torch.float64, requires_grad=True))
b = torch.nn.init.kaiming_uniform_(torch.empty(1, 1, dtype=torch.float64, requires_grad=True))
opt = torch.optim.SGD([w, b], lr=0.03)
losses, evals, at, pos = [], [], [], 0
for it in range(iterations):
    if pos >= len(train):
        pos = 0
    batch = torch.tensor(train[pos:min(pos + batch_size, len(train))])
    pos += len(batch)
    X, y = batch[:, 1:], batch[:, 0]
    loss = torch.nn.functional.mse_loss((X @ w + b).squeeze(1), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([w, b], 0.5)
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
    if (it + 1) % eval_every == 0 or it + 1 == iterations:
        at.append(it)
        evals.append(evaluate(w, b))

with open(os.path.join(out, "eval_torch.txt"), "w") as f:
    for name, values in (("eval_iterations", at), ("eval_loss", evals), ("loss", losses)):
        f.write("%s %d " % (name, len(values)) + " ".join("%.17g" % v for v in values) + "\n")
