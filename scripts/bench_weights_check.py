"""What verifying a model's weights costs per run: the stat() the cache key reads (device, inode, size, mtime, ctime)
against a full sha256 of the file, which a hash at every load would cost. Medians of several runs, the load average
printed beside them; the first hash reads the file from disk, the later ones from the page cache.

    python scripts/bench_weights_check.py --model qwen2.5-coder-1.5b --hashes 5
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import time


def main() -> None:
    from rig.registry import load_registry, resolve_weights

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--hashes", type=int, default=5)
    ap.add_argument("--stats", type=int, default=1000)
    a = ap.parse_args()
    reg = load_registry()
    path = resolve_weights(reg.get(a.model), reg.path)
    load = os.getloadavg()[0]
    hashes = []
    for _ in range(a.hashes):
        t0, h = time.perf_counter(), hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(1 << 22):
                h.update(block)
        hashes.append(time.perf_counter() - t0)
    stats = []
    for _ in range(a.stats):
        t0 = time.perf_counter()
        os.stat(path)
        stats.append(time.perf_counter() - t0)
    size = os.path.getsize(path) / 2**20
    print(
        f"| {a.model} | {size:,.0f} MiB | {statistics.median(stats) * 1e6:.1f} us | "
        f"{statistics.median(hashes):.2f} s (first {hashes[0]:.2f} s) | {load:.1f} -> {os.getloadavg()[0]:.1f} |"
    )


if __name__ == "__main__":
    main()
