"""`rig selftest`: gold and anti-gold agents on every benchmark and mode, proving each metric's reachable range."""

from __future__ import annotations

from pathlib import Path

import typer

from rig.cli.common import app, fail, parse_options, print_markdown, say, stops_cleanly


@app.command()
def selftest(
    benchmark: list[str] = typer.Option([], "--benchmark", "-b", help="Benchmark to test (repeatable; default all)."),
    data: Path | None = typer.Option(None, "--data", help="Benchmark data instead of the embedded sample."),
    option: list[str] = typer.Option([], "--option", "-O", help="Benchmark option bench.key=value (repeatable)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="The first N episodes of each mode."),
    mode: list[str] = typer.Option([], "--mode", help="Only the modes whose label contains this (repeatable)."),
    out: Path | None = typer.Option(None, "--out", help="Also write the report as JSON to this file."),
) -> None:
    """Play each benchmark's gold trajectory (and a well-formed wrong one) through rig's own engine interface, parsers,
    agent loops, grammars and scorers, and print per metric what a correct agent reaches and a wrong one falls to.
    Exit 0 when every metric reaches its bounds (documented caps aside), 1 when one does not, 2 on bad input."""
    from rig.benchmarks import benchmark_names
    from rig.execution.selftest import SelftestOptions, report_markdown, run_selftest
    from rig.progress import progress
    from rig.records import write_atomic

    if data is not None and len(benchmark) != 1:
        fail("--data names one benchmark's data: pass exactly one --benchmark")
    known = benchmark_names()
    for b in benchmark:
        if b not in known:
            fail(f"--benchmark {b!r}: unknown; available: {', '.join(known)}")
    options: dict[str, dict[str, str]] = {}
    for key, value in parse_options(option).items():
        bench, dot, name = key.partition(".")
        if not dot:
            if len(benchmark) != 1:
                fail(f"--option {key}: name its benchmark (bench.{key}) or pass one --benchmark")
            bench, name = benchmark[0], key
        options.setdefault(bench, {})[name] = value
    acceptors, missing = _acceptors()
    opts = SelftestOptions(benchmarks=benchmark, data=data, options=options, limit=limit, modes=mode)
    try:
        with (
            stops_cleanly("nothing was written; run the command again"),
            progress("selftest: benchmark x mode", transient=True) as bar,
        ):
            report = run_selftest(opts, acceptors, progress=bar.update)
    finally:
        for a in acceptors:
            close = getattr(a, "close", None)
            if close is not None:
                close()
    report.missing_acceptors = missing
    print_markdown(report_markdown(report).rstrip("\n"))  # data values and plugin text in it: made printable
    if out is not None:
        write_atomic(out, report.model_dump_json(indent=1))
    if not report.ran:
        errors = [f"{b.name} {m.mode.label}: {m.error}" for b in report.benchmarks for m in b.modes if m.error]
        fail("nothing could run" + (": " + "; ".join(errors[:5]) if errors else ""))
    if not report.ok:
        say("selftest: a metric falls short of its bounds (above)")
        raise typer.Exit(1)


def _acceptors() -> tuple[list, list[str]]:
    """The grammar engines installed here; llama.cpp over the embedded model's vocabulary when it is installed."""
    from rig.decoding.accept import acceptors
    from rig.registry import RegistryError, load_registry, resolve_weights

    try:
        reg = load_registry()
        gguf: str | None = resolve_weights(reg.get("gemma3-270m"), reg.path)
    except (RegistryError, OSError, KeyError):
        gguf = None
    if gguf is not None:
        try:
            from rig.engines.llamacpp import route_native_logs

            route_native_logs()  # llama.cpp's load lines go to its logger, not over the report
        except ImportError:
            pass
    return acceptors(gguf)
