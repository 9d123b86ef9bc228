"""Fuzz every reader of model output, and of the files a lab feeds rig, with N random inputs each; print a markdown
table.

    python3 scripts/fuzz_readers.py [--n 10000] [--seed 0] [--bound 1.0] [--reader NAME] [--files | --inputs | --valid]

Replies are drawn from a seeded mix: random Unicode, concatenations of JSON/YAML/tag fragments, one fragment
repeated up to 40,000 times, and the issue-18 regression replies. A reply fails when the reader raises (it
would be recorded as an engine crash) or takes longer than --bound seconds. ``--files`` fuzzes the readers of
`rig rescore`'s prediction files and the dataset loaders instead (``DATA_READERS``: the same inputs, after the
issue-30 ones, as whole files and in each field); there a RescoreError or DataError is the bad-input message
(exit 2 naming file and field), any other exception a failure. ``--inputs`` fuzzes the users of the bounded reader
(``FILE_READERS``: run manifests, spec files, load plans, bundle manifests, models.yaml, sweep files, divergence
reports, sweep job states, public keys, benchmark data, map pack info; issue 37) the same way, after the issue-37
inputs. ``--valid`` checks the other half: N valid values per reader of ``tests.readers.VALID_READERS`` (hypothesis,
seeded), each written as rig writes it and read back equal. Exit 1 on any failure."""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.decoding.test_readers_fuzz import _PIECES
from tests.readers import (
    DATA_READERS,
    DATA_REGRESSIONS,
    FILE_READERS,
    FILE_REGRESSIONS,
    READERS,
    REGRESSIONS,
    VALID_READERS,
    valid_reader,
)


def replies(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = list(REGRESSIONS)
    while len(out) < n:
        kind = rng.random()
        if kind < 0.3:
            out.append(
                "".join(
                    chr(rng.choice((rng.randint(0, 127), rng.randint(0, 0x2FFF), rng.randint(0, 0x10FFFF))))
                    for _ in range(rng.randint(0, 400))
                )
            )
        elif kind < 0.8:
            out.append("".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 200))))
        else:
            piece = rng.choice(_PIECES)  # up to 200,000 characters: past any reply max_tokens allows
            out.append(piece * rng.randint(1, max(1, 200_000 // len(piece))))
    return out[:n]


def _round_trips(strategy: Any, round_trip: Any, n: int, seed: int) -> Any:
    """A hypothesis check that ``n`` values of ``strategy`` (seeded) read back equal through ``round_trip``."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as with_seed

    @with_seed(seed)
    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(value=strategy)
    def check(value: object) -> None:
        assert round_trip(value) == value

    return check


def valid(names: list[str], n: int, seed: int) -> int:
    """N valid values per reader read back equal; a markdown table; the number of readers that failed."""
    print("| reader | valid values | result | seconds |")
    print("|---|---:|---|---:|")
    bad = 0
    for name in names:
        t0 = time.perf_counter()
        try:
            _round_trips(*valid_reader(name), n, seed)()
            result = "all read back equal"
        except Exception:
            bad += 1
            result = "FAILED"
            print(f"{name}: first failure:\n{traceback.format_exc(limit=3)}", file=sys.stderr)
        print(f"| {name} | {n} | {result} | {time.perf_counter() - t0:.1f} |")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bound", type=float, default=1.0, help="seconds one reply may take")
    ap.add_argument("--reader", choices=sorted({**READERS, **DATA_READERS, **FILE_READERS}), action="append")
    ap.add_argument("--files", action="store_true", help="the prediction-file readers and dataset loaders")
    ap.add_argument("--inputs", action="store_true", help="the users of the bounded reader (rig/inputs.py)")
    ap.add_argument("--valid", action="store_true", help="valid files of each reader read back equal")
    a = ap.parse_args()
    if a.valid:
        return 1 if valid([r for r in a.reader or VALID_READERS if r in VALID_READERS], a.n, a.seed) else 0
    base = replies(a.n, a.seed)
    names = a.reader or list(FILE_READERS if a.inputs else DATA_READERS if a.files else READERS)
    every = {**READERS, **DATA_READERS, **FILE_READERS}
    firsts = {**dict.fromkeys(DATA_READERS, DATA_REGRESSIONS), **dict.fromkeys(FILE_READERS, FILE_REGRESSIONS)}
    rows, bad = [], 0
    for name in names:
        read = every[name]
        texts = (firsts[name] + base)[: a.n] if name in firsts else base
        for warm in ("warm-up", *firsts.get(name, ())):
            read(warm)  # imports happen on first use (the file readers' deeper paths import more)
        failures, raised, format_errors, worst, total, first = 0, 0, 0, 0.0, 0.0, ""
        for i, text in enumerate(texts):
            t0 = time.perf_counter()
            try:
                if read(text) is not None:
                    format_errors += 1
            except Exception:
                failures, raised = failures + 1, raised + 1
                first = first or traceback.format_exc(limit=3)
            dt = time.perf_counter() - t0
            if dt > a.bound:
                failures += 1
                first = first or f"{dt:.2f}s on reply {i} ({len(text)} chars): {text[:60]!r}"
            worst, total = max(worst, dt), total + dt
            if i % 1000 == 999:
                print(f"  {name}: {i + 1}/{len(texts)}", file=sys.stderr, end="\r")
        rows.append((name, len(texts), failures, raised, format_errors, worst * 1000, total / len(texts) * 1000))
        print(f"  {name}: done", file=sys.stderr)
        bad += failures
        if first:
            print(f"{name}: first failure:\n{first}", file=sys.stderr)
    errors = "bad input" if a.files or a.inputs else "format errors"
    print(f"| reader | inputs | failures | of them raised | {errors} | max ms | mean ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, n, f, r, fe, mx, mean in rows:
        print(f"| {name} | {n} | {f} | {r} | {fe} | {mx:.1f} | {mean:.2f} |")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
