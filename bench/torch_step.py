#!/usr/bin/python3
# torch_step.py — the peer for bench/step: PyTorch's CPU training steps on the same shapes.
#   /usr/bin/python3 bench/torch_step.py [--repeats N]
# Prints one line per step, "name min_s median_s", for bench/run-step to compare.
#  linear: the DC-taxi baseline step, batch 2^20 x 8 features, float64: X @ w + b, MSE,
#          backward, clip_grad_norm_(0.5), SGD(lr 0.03); the batch is a (N, 9) tensor
#          sliced into X = batch[:, 1:] and y = batch[:, 0] as in the reference workflow.
#  mlp:    8-256-256-1 with ReLU, float32, batch 65536, MSE, Adam(lr 1e-3).
import argparse
import os
import statistics
import time

import torch


def timed(step, repeats, warmup=3):
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def linear_step(batch):
    torch.manual_seed(0)
    w = torch.nn.init.kaiming_uniform_(torch.empty(8, 1, dtype=torch.float64, requires_grad=True))
    b = torch.nn.init.kaiming_uniform_(torch.empty(1, 1, dtype=torch.float64, requires_grad=True))
    opt = torch.optim.SGD([w, b], lr=0.03)

    def step():
        X, y = batch[:, 1:], batch[:, 0]
        loss = torch.nn.functional.mse_loss((X @ w + b).squeeze(), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([w, b], 0.5)
        opt.step()
        opt.zero_grad()
        return loss.item()
    return step


def mlp_step(X, y):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = torch.nn.functional.mse_loss(model(X).squeeze(1), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    g = torch.Generator().manual_seed(1)
    batch = torch.rand(1 << 20, 9, dtype=torch.float64, generator=g) * 10
    print("linear %.6f %.6f" % timed(linear_step(batch), args.repeats))
    X = torch.randn(65536, 8, generator=g)
    y = torch.randn(65536, generator=g)
    print("mlp %.6f %.6f" % timed(mlp_step(X, y), max(3, args.repeats // 4)))


if __name__ == "__main__":
    main()
