"""`rig load`: accuracy and latency of the same episodes at several concurrency levels, paired against level 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rig.benchmarks import DEFAULT_BENCHMARK
from rig.cli.common import (
    DEFAULT_MODEL,
    allow_host_option,
    app,
    bench_flags,
    experiment_option,
    fail,
    mlflow_option,
    mlflow_ready,
    print_markdown,
    say,
    spec_option,
    stops_cleanly,
    to_mlflow,
)
from rig.paths import RUNS


@app.command()
def load(
    ctx: typer.Context,
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
    benchmark: str = spec_option("benchmark", "-b", default=DEFAULT_BENCHMARK, help="Benchmark to run."),
    limit: int | None = spec_option("limit"),
    repeats: int = spec_option("repeats", "-k"),
    data: Path | None = spec_option("data"),
    out_dir: Path = typer.Option(RUNS, "--out", help="Where the level runs and the load test go."),
    resume: str | None = typer.Option(
        None, "--resume", help="A load id (folder in --out): finished levels are kept, the others run or resume."
    ),
    gpu: int | None = spec_option("gpu"),
    decode: str = spec_option("decode"),
    tool_mode: str | None = spec_option("tool_mode", default=None),
    option: list[str] = spec_option("options", "-O", default=[]),
    seed: int | None = spec_option("seed", help="One seed for every level, so episodes and sampling match."),
    max_tokens: int | None = spec_option("max_tokens"),
    models_file: Path | None = spec_option("models_file"),
    mlflow: str | None = mlflow_option(),
    experiment: str = experiment_option(),
    allow_host: list[str] = allow_host_option(),
) -> None:
    """Run the same seeded episodes at each concurrency level (each level its own `rig bench` process) and report
    per level the score with its CI, paired flips against level 1, TTFT and end-to-end p50/p95/p99, tokens/s and
    goodput; the verdict is the highest level non-inferior to level 1 with every SLO holding."""
    from rig.analyses.load.measure import analyse
    from rig.analyses.load.records import LoadSettings
    from rig.analyses.load.render import write_load
    from rig.analyses.load.run import run_load
    from rig.analyses.load.slo import parse_levels, parse_slos
    from rig.execution.bench import BenchError, bench_options
    from rig.runfolder.spec import SpecError

    mlflow_ready(mlflow, allow_host)
    # The run flags by their names in ctx.params, as `rig bench` takes them; --concurrency is the levels here.
    params = {k: v for k, v in ctx.params.items() if k != "concurrency"}
    values = {**bench_flags(params, option, absolute_models=True), "out": out_dir}
    # The flags given on the command line (by name: typer carries its own copy of click's ParameterSource)
    given = {p for p in ctx.params if getattr(ctx.get_parameter_source(p), "name", "DEFAULT") != "DEFAULT"}
    try:
        # Validated as `rig bench` validates its flags (the same words for a bad value), --resume or not.
        bench = bench_options(values)
        with stops_cleanly("no level was started; run the command again"):
            if resume is not None:  # the load's recorded settings, as `rig bench --resume` takes the run's
                again = set(values) & given - {"out", "models_file", "options"}
                asked_again: dict[str, Any] = {k: getattr(bench, k) for k in again}
                if "option" in given:
                    asked_again["options"] = bench.options
                if "concurrency" in given:
                    asked_again["levels"] = parse_levels(concurrency)
                if "slo" in given:
                    asked_again["slos"] = parse_slos(slo)
                if "margin" in given:
                    asked_again["margin"] = margin
                ldir, settings, runs = run_load(None, say=say, resume=resume, out=out_dir, given=asked_again)
            else:
                levels, slos = parse_levels(concurrency), parse_slos(slo)
                asked = LoadSettings(bench=bench, levels=levels, slos=slos, margin=margin)
                ldir, settings, runs = run_load(asked, say=say)
    except (BenchError, SpecError) as e:
        fail(str(e))
    md = write_load(ldir, analyse(settings, runs))
    say(f"load test: {ldir} (load.md, load.html, load.json; the figure as SVG, PDF and PNG)")
    print_markdown(md)
    if mlflow is not None:
        from rig.integrations.mlflow import load_group

        to_mlflow(mlflow, experiment, allow_host, group=load_group(ldir))
