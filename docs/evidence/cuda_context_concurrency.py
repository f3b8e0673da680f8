"""Whether CUDA contexts are made in parallel: N processes forked from one that imported torch
(CUDA untouched, as the fork server) each make their context at the same moment.

    python docs/evidence/cuda_context_concurrency.py [--counts 1,2,4,8,16] [--hold]

Per N: the wall time until every process has its context (torch.cuda.init and a synchronize),
the median per process, and contexts per second; then the same for each process's first CUDA op
after that (torch.ones(4).sum().item(), which loads torch's kernels lazily). Contexts made one
after another by the driver show as a wall time growing with N. --hold: another process holds a
CUDA context throughout (the driver stays initialized between rounds without persistence mode).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch


def child(start_at: float, out: int) -> None:
    while time.time() < start_at:
        time.sleep(0.0005)
    t0 = time.time()
    torch.cuda.init()
    torch.cuda.synchronize()
    t1 = time.time()
    torch.ones(4, device="cuda").sum().item()
    t2 = time.time()
    os.write(out, (json.dumps([t0, t1, t2]) + "\n").encode())
    os._exit(0)


def one_round(n: int) -> str:
    read, write = os.pipe()
    start_at = time.time() + 0.5
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(read)
            child(start_at, write)
        pids.append(pid)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    for pid in pids:
        os.waitpid(pid, 0)
    rows = [json.loads(line) for line in data.decode().splitlines()]
    contexts = max(r[1] for r in rows) - start_at
    ops = max(r[2] for r in rows) - min(r[1] for r in rows)
    each = statistics.median(r[1] - r[0] for r in rows)
    first_op = statistics.median(r[2] - r[1] for r in rows)
    return (f"{n:2d} at once: all contexts in {1000 * contexts:.0f} ms (median each "
            f"{1000 * each:.0f} ms, {n / contexts:.1f} a second); first op: median "
            f"{1000 * first_op:.0f} ms, all within {1000 * ops:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", default="1,2,4,8,16")
    parser.add_argument("--hold", action="store_true")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    assert not torch.cuda.is_initialized()
    if args.hold:
        holder = os.fork()
        if holder == 0:
            torch.cuda.init()
            torch.cuda.synchronize()
            time.sleep(3600)
            os._exit(0)
        time.sleep(3)
    try:
        for n in counts:
            print(("holding " if args.hold else "") + one_round(n), flush=True)
    finally:
        if args.hold:
            os.kill(holder, 9)
            os.waitpid(holder, 0)


if __name__ == "__main__":
    main()
