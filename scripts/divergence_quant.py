"""Token-level divergence of requantized variants of the embedded model, and what the pass costs.

For each benchmark, ``--repeats`` times in turn: generate N episodes with the reference model (`rig bench`), then the
divergence pass over that run (`python -m rig.analyses.divergence`) with one variant and with all of them. Each step is
timed the same way, as the wall time of its own process (imports and model loads included on both sides); the cost
ratio is the median pass time over the median generation time, measured in the same run on the same machine
(generation and passes interleaved, so a change of load hits both). The per-class table goes to markdown.
Variants are made beforehand with `rig models quantize gemma3-270m --to q8_0 ... --models MODELS`.

Beside rig's pass, each repeat times the floor of any full-vocabulary teacher-forced pass: raw llama-cpp-python (no
rig code in the timed process) prefilling the same token sequences through the reference and the first variant, with
logits requested at the reply positions only and nothing computed from them, every shared prefix reused (not only
rig's aligned blocks). "Variant only" leaves the reference out: what a pass would cost if the reference's
distributions had been kept from generation.

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

from rig.analyses.divergence.output import read_report
from rig.analyses.divergence.records import DivergenceSettings, VariantSource
from rig.records import write_record


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(argv)}\n{p.stderr[-2000:]}")
    return time.perf_counter() - t0


def sequences(run: Path, models: str) -> tuple[list[tuple[list[int], int]], int]:
    """The (tokens, reply start) pairs the pass scores, rebuilt as it does (rig's replay and tokenizer), and n_ctx."""
    from rig.analyses.divergence.replay import replay_pairs
    from rig.engines.logits import LlamaCppScorer
    from rig.registry import load_registry, resolve_weights
    from rig.runfolder.folder import RunFolder

    cfg = RunFolder(run).manifest.config.model
    spec = load_registry(models).get(cfg.name)
    sc = LlamaCppScorer(resolve_weights(spec, models), cfg.context_length)
    try:
        inner = sc.replay_engine(spec)
        out = []
        for p in replay_pairs(run, inner)[0]:
            prompt, reply = sc.prompt_tokens(inner, p.request), sc.reply_tokens(p.reply.text)
            if reply:
                out.append((prompt + reply, len(prompt)))
        return out, cfg.context_length
    finally:
        sc.close()


def floor_process(argv: list[str]) -> None:
    """``floor WEIGHTS,WEIGHTS SEQUENCES.json N_CTX``: each model's load and forward time on the sequences, as JSON."""
    import llama_cpp
    from llama_cpp import Llama

    from rig.engines.llamacpp import physical_cores

    weights, seqs, n_ctx = argv[0].split(","), sorted(json.loads(Path(argv[1]).read_text())), int(argv[2])
    out: dict[str, list[float]] = {"load_s": [], "forward_s": []}
    for w in weights:
        t0 = time.perf_counter()
        llm = Llama(
            model_path=w,
            n_ctx=n_ctx,
            n_batch=512,
            n_ubatch=512,
            n_threads=physical_cores(),
            swa_full=True,
            verbose=False,
        )
        ctx, batch = llm._ctx.ctx, llama_cpp.llama_batch_init(512, 0, 1)
        mem = llama_cpp.llama_get_memory(ctx)
        t1 = time.perf_counter()
        cached: list[int] = []
        for toks, first in seqs:
            keep = 0
            while keep < min(len(cached), first - 1) and cached[keep] == toks[keep]:
                keep += 1
            llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1)
            pos, last = keep, len(toks) - 1
            while pos < last:  # the prompt in 512-token batches, then the reply predictors in 64-row chunks
                end, want = (min(pos + 512, first - 1), False) if pos < first - 1 else (min(pos + 64, last), True)
                batch.n_tokens = end - pos
                for i, t in enumerate(toks[pos:end]):
                    batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, pos + i, 1, want
                    batch.seq_id[i][0] = 0
                if llama_cpp.llama_decode(ctx, batch) != 0:
                    sys.exit(f"llama_decode failed on {w}")
                pos = end
            cached = toks[:last]
        out["load_s"].append(t1 - t0)
        out["forward_s"].append(time.perf_counter() - t1)
        llama_cpp.llama_batch_free(batch)
        llm.close()
    print(json.dumps(out))


def floor(run: Path, models: str, variant: str, work: Path) -> tuple[float, float]:
    """Wall time of the floor process over both models, and of it less the reference's load and forward."""
    from rig.registry import load_registry, resolve_weights
    from rig.runfolder.folder import RunFolder

    seqs, n_ctx = sequences(run, models)
    (work / "sequences.json").write_text(json.dumps(seqs))
    reg = load_registry(models)
    names = [RunFolder(run).manifest.config.model.name, variant]
    weights = ",".join(resolve_weights(reg.get(n), models) for n in names)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, __file__, "floor", weights, str(work / "sequences.json"), str(n_ctx)],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"floor failed ({p.returncode}):\n{p.stderr[-2000:]}")
    t = json.loads(p.stdout.strip().splitlines()[-1])
    return wall, wall - t["load_s"][0] - t["forward_s"][0]


def divergence(run: Path, variants: list[str], models: str, out: Path) -> tuple[float, Path]:
    out.mkdir(parents=True, exist_ok=True)
    s = DivergenceSettings(
        reference_run=str(run), variants=[VariantSource(model=v) for v in variants], out=str(out), models_file=models
    )
    write_record(out / "settings.json", s)
    return timed([sys.executable, "-m", "rig.analyses.divergence", str(out / "settings.json")]), out


def main() -> None:
    if sys.argv[1:2] == ["floor"]:
        floor_process(sys.argv[2:])
        return
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
        f"Pass, {len(variants)} variants (s) | Ratio per variant | Ratios of each repeat (1 variant) | "
        "Floor, 2 models (s) | Floor ratio | Floor ratio, variant only |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for spec in a.bench:
        name, _, rest = spec.partition(":")
        limit, *opts = rest.split(":")
        gens, ones, alls, floors, floor_ones = [], [], [], [], []
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
            two, one = floor(run, a.models, variants[0], work / name / f"one-{k}")
            floors.append(two)
            floor_ones.append(one)
            print(
                json.dumps(
                    {
                        "bench": name,
                        "repeat": k,
                        "gen_s": gens[-1],
                        "one_s": ones[-1],
                        "all_s": all_s,
                        "floor_s": two,
                        "floor_variant_only_s": one,
                    }
                ),
                flush=True,
            )
        gen_s, one_s, all_s, floor_s, floor_one = (statistics.median(x) for x in (gens, ones, alls, floors, floor_ones))
        rep = read_report(out)
        each = ", ".join(f"{o / g:.2f}" for o, g in zip(ones, gens, strict=True))
        cost.append(
            f"| {name} | {rep.episodes} | {rep.pairs} | {gen_s:.1f} | {one_s:.1f} | {one_s / gen_s:.2f} | "
            f"{all_s:.1f} | {all_s / gen_s / len(variants):.2f} | {each} | {floor_s:.1f} | {floor_s / gen_s:.2f} | "
            f"{floor_one / gen_s:.2f} |"
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
        heads = [r for r in rep.classes if r.token_class == "all"]
        monotone = all(
            x.mean_kld is not None and y.mean_kld is not None and x.mean_kld < y.mean_kld
            for x, y in itertools.pairwise(heads)
        )
        separated = all(
            x.kld_ci_high is not None and y.kld_ci_low is not None and x.kld_ci_high < y.kld_ci_low
            for x, y in itertools.pairwise(heads)
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
