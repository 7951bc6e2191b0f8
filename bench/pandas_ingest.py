#!/usr/bin/python3
"""pandas_ingest.py — the peer for bench/ingest: pandas.read_csv on the same files, MB/s on one core.

Run with Debian's interpreter (apt-get install -y python3-pandas):
    /usr/bin/python3 bench/pandas_ingest.py [--repeats R] DIR
Each file is read into memory first, as bench/ingest does, so both time parsing
(into float64 / float32 columns), not the page cache; wall time and the thread's
CPU time (time.thread_time) are both reported. Prints lines in the format
of bench/ingest ("parse float64: ... best_MBps X median_MBps Y").
"""
import argparse
import glob
import io
import os
import statistics
import time

import numpy as np
import pandas as pd


def parse_all(blobs, dtype, precision):
    rows = 0
    for b in blobs:
        df = pd.read_csv(io.BytesIO(b), header=None, dtype=dtype, engine="c", float_precision=precision)
        rows += len(df)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("dir")
    args = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(args.dir, "part-*.csv")))
    if not paths:
        raise SystemExit(f"pandas_ingest: nothing matches {args.dir}/part-*.csv")
    blobs = []
    for p in paths:
        with open(p, "rb") as f:
            blobs.append(f.read())
    nbytes = sum(len(b) for b in blobs)
    # pandas' default converter ("high") is not always correctly rounded; round_trip is, as ours is.
    for name, dtype, precision in (("float64", np.float64, None), ("float32", np.float32, None),
                                   ("float64_round_trip", np.float64, "round_trip")):
        parse_all(blobs[:1], dtype, precision)  # warm-up
        times, cpu = [], []
        rows = 0
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.thread_time()
            rows = parse_all(blobs, dtype, precision)
            times.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
        best, median = min(times), statistics.median(times)
        cbest, cmedian = min(cpu), statistics.median(cpu)
        print(f"parse {name}: files {len(paths)} bytes {nbytes} rows {rows} repeats {args.repeats} "
              f"best_MBps {nbytes / 1e6 / best:.1f} median_MBps {nbytes / 1e6 / median:.1f} "
              f"cpu_best_MBps {nbytes / 1e6 / cbest:.1f} cpu_median_MBps {nbytes / 1e6 / cmedian:.1f} "
              f"best_Mrows_s {rows / 1e6 / best:.2f} pandas {pd.__version__}", flush=True)


if __name__ == "__main__":
    main()
