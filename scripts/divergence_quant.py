"""Token-level divergence of requantized variants of the embedded model, and what the pass costs.

For each benchmark, ``--repeats`` times in turn: generate N episodes with the reference model (`rig bench`), then the
divergence pass over that run (`python -m rig.runs.divergence`) with one variant and with all of them. Each step is
timed the same way, as the wall time of its own process (imports and model loads included on both sides); the cost
ratio is the median pass time over the median generation time, measured in the same run on the same machine
(generation and passes interleaved, so a change of load hits both). The per-class table goes to markdown.
Variants are made beforehand with `rig models quantize gemma3-270m --to q8_0 ... --models MODELS`.

    python scripts/divergence_quant.py --models my-models.yaml --variants gemma3-270m-q8_0,gemma3-270m-q4_0 \
        --bench callnavi:6 --bench evgeoqa:2:max_steps=4 --out benchmarks/results/divergence.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rig.records import write_record
from rig.runs.divergence import DivergenceSettings, VariantSource, read_report


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(argv)}\n{p.stderr[-2000:]}")
    return time.perf_counter() - t0


def divergence(run: Path, variants: list[str], models: str, out: Path) -> tuple[float, Path]:
    out.mkdir(parents=True, exist_ok=True)
    s = DivergenceSettings(
        reference_run=str(run), variants=[VariantSource(model=v) for v in variants], out=str(out), models_file=models
    )
    write_record(out / "settings.json", s)
    return timed([sys.executable, "-m", "rig.runs.divergence", str(out / "settings.json")]), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--variants", required=True, help="comma-separated models.yaml names, most bits first")
    ap.add_argument(
        "--bench",
        action="append",
        required=True,
        help="NAME:LIMIT[:KEY=VALUE...], e.g. callnavi:6 or evgeoqa:2:max_steps=4",
    )
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--option", "-O", action="append", default=[])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=3, help="generation + passes this many times; medians reported")
    a = ap.parse_args()
    variants = a.variants.split(",")
    work = a.work or Path(tempfile.mkdtemp(prefix="rig-div-"))
    lines = [
        "# Token-level divergence of requantized gemma3-270m variants",
        "",
        f"Reference: gemma3-270m (Q4_K_M, the embedded model); variants made from it with `rig models quantize`. "
        f"Host: {platform.machine()}, {platform.processor() or 'cpu'}; produced by `scripts/divergence_quant.py`.",
        "Mean KL divergence reference -> variant in nats over the full vocabulary, 95% CI by resampling episodes.",
        "",
    ]
    cost = [
        "| Benchmark | Episodes | Replies | Generation (s) | Pass, 1 variant (s) | Ratio | "
        f"Pass, {len(variants)} variants (s) | Ratio per variant | Ratios of each repeat (1 variant) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for spec in a.bench:
        name, _, rest = spec.partition(":")
        limit, *opts = rest.split(":")
        gens, ones, alls = [], [], []
        for k in range(a.repeats):
            runs = work / name / f"runs-{k}"
            argv = [
                sys.executable,
                "-m",
                "rig.cli",
                "bench",
                "--model",
                "gemma3-270m",
                "--benchmark",
                name,
                "--limit",
                limit or "4",
                "--out",
                str(runs),
                "--no-report",
                "--models",
                a.models,
            ]
            if a.max_tokens:
                argv += ["--max-tokens", str(a.max_tokens)]
            for o in [*a.option, *opts]:
                argv += ["-O", o]
            gens.append(timed(argv))
            run = next(runs.iterdir())
            ones.append(divergence(run, variants[:1], a.models, work / name / f"one-{k}")[0])
            all_s, out = divergence(run, variants, a.models, work / name / f"all-{k}")
            alls.append(all_s)
            print(
                json.dumps({"bench": name, "repeat": k, "gen_s": gens[-1], "one_s": ones[-1], "all_s": all_s}),
                flush=True,
            )
        gen_s, one_s, all_s = (statistics.median(x) for x in (gens, ones, alls))
        rep = read_report(out)
        each = ", ".join(f"{o / g:.2f}" for o, g in zip(ones, gens, strict=True))
        cost.append(
            f"| {name} | {rep.episodes} | {rep.pairs} | {gen_s:.1f} | {one_s:.1f} | {one_s / gen_s:.2f} | "
            f"{all_s:.1f} | {all_s / gen_s / len(variants):.2f} | {each} |"
        )
        lines += [
            f"## {name} ({rep.episodes} episodes, {rep.pairs} replies)",
            "",
            "| Variant | Token class | Tokens | Mean KLD | CI low | CI high | Top-1 agreement | p99 KLD |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rep.classes:
            if r.tokens:
                lines.append(
                    f"| {r.variant} | {r.token_class} | {r.tokens} | {r.mean_kld:.4f} | {r.kld_ci_low:.4f} | "
                    f"{r.kld_ci_high:.4f} | {r.top1_agreement:.3f} | {r.p99_kld:.3f} |"
                )
        alls = [r for r in rep.classes if r.token_class == "all"]
        monotone = all(
            x.mean_kld is not None and y.mean_kld is not None and x.mean_kld < y.mean_kld
            for x, y in itertools.pairwise(alls)
        )
        separated = all(
            x.kld_ci_high is not None and y.kld_ci_low is not None and x.kld_ci_high < y.kld_ci_low
            for x, y in itertools.pairwise(alls)
        )
        lines += [
            "",
            f"Ordering by bits monotone in mean KLD (class all): {'yes' if monotone else 'NO'}; "
            f"CIs of adjacent variants separated: {'yes' if separated else 'NO'}.",
            "",
        ]
    lines += [
        "## Cost",
        "",
        f"Wall time of each step as a separate process (model loads included), median of {a.repeats} repeats in "
        "one run of this script on the same machine; ratio = median divergence pass / median generation of the "
        "reference episodes.",
        "",
        *cost,
        "",
    ]
    a.out.write_text("\n".join(lines))
    print(a.out.read_text())


if __name__ == "__main__":
    main()
