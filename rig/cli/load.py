"""`rig load`: accuracy and latency of the same episodes at several concurrency levels, paired against level 1."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from rig.cli.common import DEFAULT_MODEL, app, fail, parse_options, say, tool_mode_for


@app.command()
def load(
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m", help="A model whose engine batches (vLLM, a server)."),
    concurrency: str = typer.Option(
        "1,4,16", "--concurrency", "-c", help="Levels, ascending from 1 (the reference): 1,2,4."
    ),
    slo: str | None = typer.Option(
        None, "--slo", help="Latency objectives over every request of a level: ttft_p95=2s,e2e_p95=30s (p50/p95/p99)."
    ),
    margin: float = typer.Option(
        0.05, "--margin", min=0, max=0.99, help="Non-inferiority margin in headline-score units (0.05: 5 points)."
    ),
    benchmark: str = typer.Option("callnavi", "--benchmark", "-b"),
    limit: int | None = typer.Option(None, "--limit", min=1),
    repeats: int = typer.Option(1, "--repeats", "-k", min=1),
    data: Path | None = typer.Option(None, "--data"),
    out_dir: Path = typer.Option(Path("runs"), "--out"),
    resume: str | None = typer.Option(
        None, "--resume", help="A load id (folder in --out): finished levels are kept, the others run or resume."
    ),
    gpu: int | None = typer.Option(None, "--gpu"),
    decode: str = typer.Option("none", "--decode"),
    tool_mode: str | None = typer.Option(None, "--tool-mode"),
    option: list[str] = typer.Option([], "--option", "-O"),
    seed: int = typer.Option(0, "--seed", help="One seed for every level, so episodes and sampling match."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1),
    models_file: Path | None = typer.Option(None, "--models"),
) -> None:
    """Run the same seeded episodes at each concurrency level (each level its own `rig bench` process) and report
    per level the score with its CI, paired flips against level 1, TTFT and end-to-end p50/p95/p99, tokens/s and
    goodput; the verdict is the highest level non-inferior to level 1 with every SLO holding."""
    from rig.runs.bench import BenchError, bench_options
    from rig.runs.load import LoadSettings, analyse, parse_levels, parse_slos, run_load, write_load
    from rig.runs.spec import DECODES, SpecError

    if decode not in DECODES:
        fail(f"--decode {decode!r}: choose {', '.join(DECODES)}")
    try:
        if resume is not None:  # the load's recorded settings, as `rig bench --resume` takes the run's
            ldir, settings, runs = run_load(None, say=say, resume=resume, out=out_dir)
        else:
            flags = dict(
                model=model,
                benchmark=benchmark,
                limit=limit,
                repeats=repeats,
                data=data,
                out=out_dir,
                gpu=gpu,
                decode=decode,
                tool_mode=tool_mode_for(tool_mode, decode),
                options=parse_options(option),
                seed=seed,
                max_tokens=max_tokens,
                models_file=models_file.resolve() if models_file else None,
            )
            bench = bench_options({k: v for k, v in flags.items() if v is not None})
            asked = LoadSettings(bench=bench, levels=parse_levels(concurrency), slos=parse_slos(slo), margin=margin)
            ldir, settings, runs = run_load(asked, say=say)
    except (BenchError, SpecError) as e:
        fail(str(e))
    md = write_load(ldir, analyse(settings, runs))
    say(f"load test: {ldir} (load.md, load.html, load.json; the figure as SVG, PDF and PNG)")
    sys.stdout.write(md + "\n")
