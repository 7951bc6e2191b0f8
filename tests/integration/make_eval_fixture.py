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
# Networks, on small CSVs this script writes next to the fixture (eval_{ce,bce}_{train,test}.csv:
# 256 and 100 rows, label first, 8 features with 6 decimals): nn.Sequential(Linear(8,16), ReLU,
# Linear(16,K)) in float64, built after torch.manual_seed(0) (nn.Linear's own init), Adam lr 0.01,
# batch 64, 10 iterations, eval_every 3 (evaluations after iterations 2, 5, 8 and 9; the test set in
# batches of 64 and 36 rows). "ce": 3 classes with cross_entropy; "bce": labels 0/1, one output,
# binary_cross_entropy_with_logits. Records <name>_eval_loss (4 values) and <name>_loss (10).
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


def write_csv(path, labels, X):
    with open(path, "w") as f:
        for lab, row in zip(labels, X):
            f.write("%d," % lab + ",".join("%.6f" % v for v in row) + "\n")
    return np.loadtxt(path, delimiter=",", ndmin=2)   # the values as traind parses them


def network(name, outputs, loss_fn, label_of):
    rng = np.random.default_rng(11)
    X = rng.standard_normal((356, 8))
    labels = label_of(X)
    tr = write_csv(os.path.join(out, "eval_%s_train.csv" % name), labels[:256], X[:256])
    te = write_csv(os.path.join(out, "eval_%s_test.csv" % name), labels[256:], X[256:])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16, dtype=torch.float64), torch.nn.ReLU(),
                                torch.nn.Linear(16, outputs, dtype=torch.float64))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def batch_loss(rows):
        b = torch.tensor(rows)
        X, y = b[:, 1:], b[:, 0]
        out = model(X)
        return loss_fn(out, y)

    losses, evals = [], []
    for it in range(10):
        pos = it % 4 * 64
        loss = batch_loss(tr[pos:pos + 64])
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if (it + 1) % 3 == 0 or it + 1 == 10:
            with torch.no_grad():
                total = sum(batch_loss(te[p:p + 64]).item() * len(te[p:p + 64]) for p in range(0, len(te), 64))
            evals.append(total / len(te))
    return [(name + "_eval_loss", evals), (name + "_loss", losses)]


records = network("ce", 3, lambda out, y: torch.nn.functional.cross_entropy(out, y.long()),
                  lambda X: np.argmax(X[:, :3] + 0.5 * X[:, 3:6], axis=1))
records += network("bce", 1, lambda out, y: torch.nn.functional.binary_cross_entropy_with_logits(
                       out.squeeze(1), y), lambda X: (X[:, 0] + X[:, 1] > 0).astype(int))
with open(os.path.join(out, "eval_torch.txt"), "a") as f:
    for name, values in records:
        f.write("%s %d " % (name, len(values)) + " ".join("%.17g" % v for v in values) + "\n")
