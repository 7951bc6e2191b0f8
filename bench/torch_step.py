#!/usr/bin/python3
# torch_step.py — the peer for bench/step: PyTorch's training steps on the same shapes, on the
# CPU or a GPU (tensors and model on the device; loss.item() waits for each step, as ours does).
#   /usr/bin/python3 bench/torch_step.py [--repeats N] [--device cpu|cuda:N] [--rows N] [--mlp-rows M]
# Prints one line per step, "name min_s median_s", for bench/run-step to compare.
#  linear: the DC-taxi baseline step, batch 2^20 (--rows) x 8 features, float64: X @ w + b, MSE,
#          backward, clip_grad_norm_(0.5), SGD(lr 0.03); the batch is a (N, 9) tensor
#          sliced into X = batch[:, 1:] and y = batch[:, 0] as in PyTorch's DC-taxi example.
#  mlp:    8-256-256-1 with ReLU, float32, batch 65536 (--mlp-rows), MSE, Adam(lr 1e-3); float32
#          GEMMs in plain FP32 on a GPU (no TF32), as traind's CUDA backend does them.
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
    w = torch.nn.init.kaiming_uniform_(torch.empty(8, 1, dtype=torch.float64))
    b = torch.nn.init.kaiming_uniform_(torch.empty(1, 1, dtype=torch.float64))
    w = w.to(batch.device).requires_grad_()
    b = b.to(batch.device).requires_grad_()
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
                                torch.nn.ReLU(), torch.nn.Linear(256, 1)).to(X.device)
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
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rows", type=int, default=1 << 20)
    ap.add_argument("--mlp-rows", type=int, default=65536)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.cuda.set_device(dev)
    g = torch.Generator().manual_seed(1)
    batch = (torch.rand(args.rows, 9, dtype=torch.float64, generator=g) * 10).to(dev)
    print("linear %.6f %.6f" % timed(linear_step(batch), args.repeats))
    X = torch.randn(args.mlp_rows, 8, generator=g).to(dev)
    y = torch.randn(args.mlp_rows, generator=g).to(dev)
    print("mlp %.6f %.6f" % timed(mlp_step(X, y), max(3, args.repeats // 4)))


if __name__ == "__main__":
    main()
