"""A bandwidth probe under a controlled competing load, and the MBU a run would print against it.

Each round: a probe with no load started by this script (the host's own load is recorded, not controlled), then a
probe while busy-loop processes run on every usable core (started here), then `rig bench` on the embedded
gemma3-270m (CallNavi, seeded --limit) with the loaded probe as the host's cached peak, after the busy processes have
stopped. The run's MBU against the loaded probe is what rig printed before probes recorded their conditions (now
printed with "peak in doubt" beside it); against the round's unloaded probe, what it should be. Medians over rounds.

    python scripts/mbu_under_load.py --rounds 3

Writes (or replaces) the section "Under a controlled competing load" of benchmarks/results/mbu.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rig.execution.bench import BenchOptions, run_bench
from rig.render.screen import run_summaries
from rig.telemetry.bandwidth import CONTENDED_SHARE, probe_cpu, usable_cores
from rig.telemetry.peak import BandwidthProbe, save_probe

SECTION = "## Under a controlled competing load"


def loaded_probe(busy: int) -> BandwidthProbe:
    """A probe while ``busy`` processes spin on the cores (started and stopped here)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(0.5)  # spinning before the probe starts
        return probe_cpu()
    finally:
        for p in procs:
            p.kill()
            p.wait()


def share(p: BandwidthProbe) -> float:
    c = p.conditions
    return 100 * (c.others_share or 0) if c else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", type=int, default=usable_cores(), help="busy processes (default: one per usable core)")
    ap.add_argument("--limit", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/mbu.md"))
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rig-mbu-load-"))
    os.environ["RIG_CACHE"] = str(work / "cache")
    load_start = os.getloadavg()[0]
    rows: dict[str, list[float]] = {}
    marked_quiet = marked_loaded = 0
    doubts: list[str] = []
    for i in range(a.rounds):
        quiet = probe_cpu()
        loaded = loaded_probe(a.busy)
        marked_quiet += bool(quiet.conditions and quiet.conditions.contended)
        marked_loaded += bool(loaded.conditions and loaded.conditions.contended)
        save_probe(loaded)  # the host's cached peak for the run, as a first `rig doctor --bandwidth` under load
        run_dir = run_bench(
            BenchOptions(
                model="gemma3-270m", benchmark="callnavi", limit=a.limit, max_tokens=a.max_tokens, out=work / "runs"
            )
        )
        _man, sums = run_summaries(run_dir)
        eff = sums[0].efficiency
        assert eff.decode_bytes_per_s is not None, eff
        achieved = eff.decode_bytes_per_s
        doubts = eff.peak_doubts
        for name, v in (
            ("probe without the competing load (GB/s)", quiet.bytes_per_s / 1e9),
            ("others' share of the cores during that probe (%)", share(quiet)),
            (f"probe under {a.busy} busy processes (GB/s)", loaded.bytes_per_s / 1e9),
            ("others' share of the cores during the loaded probe (%)", share(loaded)),
            ("rig decode bandwidth (GB/s)", achieved / 1e9),
            ("MBU against the loaded probe: printed before (%)", 100 * achieved / loaded.bytes_per_s),
            ("MBU against the probe without the load (%)", 100 * achieved / quiet.bytes_per_s),
            ("the two MBUs' ratio (x)", quiet.bytes_per_s / loaded.bytes_per_s),
            ("1-minute load average after the round", os.getloadavg()[0]),
        ):
            rows.setdefault(name, []).append(v)
        print(
            f"round {i + 1}: unloaded {quiet.bytes_per_s / 1e9:.2f} GB/s (others {share(quiet):.0f}%), loaded "
            f"{loaded.bytes_per_s / 1e9:.2f} GB/s (others {share(loaded):.0f}%), decode {achieved / 1e9:.2f} GB/s, "
            f"MBU {100 * achieved / loaded.bytes_per_s:.1f}% vs {100 * achieved / quiet.bytes_per_s:.1f}%, "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    med = statistics.median
    ratios = rows["the two MBUs' ratio (x)"]
    lines = [
        SECTION,
        "",
        f"Host: shared with other engineers' work (1-minute load {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end, on {usable_cores()} cores), so the probe without this script's load is "
        "not a quiet probe either. Each round: that probe, then a probe while "
        f"{a.busy} busy-loop processes spin (one per core), then `rig bench -b callnavi --limit {a.limit} --max-tokens "
        f"{a.max_tokens}` on gemma3-270m with the loaded probe as the cached peak. Medians of {a.rounds} rounds. Made "
        f"by `python scripts/mbu_under_load.py --rounds {a.rounds}`.",
        "",
        "| measure | median | rounds |",
        "|---|---|---|",
        *[f"| {n} | {med(v):.2f} | {', '.join(f'{x:.2f}' for x in v)} |" for n, v in rows.items()],
        "",
        f"- Probes marked as under load (others over {100 * CONTENDED_SHARE:.0f}% of the cores): {marked_loaded} of "
        f"{a.rounds} loaded probes, {marked_quiet} of {a.rounds} probes without this script's load (the host's own).",
        "- The MBU printed against the loaded peak / against the unloaded one, per round: median "
        f"**{med(ratios):.2f}x** (range {min(ratios):.2f} to {max(ratios):.2f}x); rig now prints it with the doubt "
        f"beside it: {'; '.join(doubts) or 'none'}.",
        "",
    ]
    text = a.out.read_text() if a.out.exists() else ""
    if SECTION in text:  # the section is replaced, up to the next one
        head, _, rest = text.partition(SECTION)
        nxt = rest.find("\n## ")
        text = head + "\n".join(lines) + (rest[nxt:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines)
    a.out.write_text(text)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
