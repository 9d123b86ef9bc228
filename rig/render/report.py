"""Markdown report of a run: the benchmark's own tables, then its `RunSummary` (headline CI, latency, tokens, memory).

A value that was not measured prints as "not measured", never as 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rig.benchmarks import benchmark_tables
from rig.benchmarks.base import Table
from rig.records import CALL_FORMS
from rig.render.reliability import failure_table, pass_k_table
from rig.runfolder.folder import RunFolder
from rig.runfolder.manifest import RunManifest
from rig.runfolder.summary import RunSummary

NM = "not measured"


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _gib(b: float | None) -> str:
    return NM if b is None else f"{b / 2**30:.2f} GiB"


def table_md(t: Table) -> str:
    lines = [f"### {t.title}", "", "| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in t.rows]
    if not t.rows:
        lines.append("| " + " | ".join(["(none)"] + [""] * (len(t.columns) - 1)) + " |")
    if t.note:
        lines += ["", f"_{t.note}_"]
    return "\n".join(lines) + "\n"


def telemetry_table(s: RunSummary) -> Table:
    def secs(v: float | None) -> str:
        return NM if v is None else f"{v:.3f}"

    if s.gpu_unavailable is not None:
        gpu_peak = gpu_load = f"{NM} ({s.gpu_unavailable})"
    else:
        gpu_peak, gpu_load = _gib(s.gpu_peak_bytes), _gib(s.gpu_load_bytes)
    rows: list[list[Any]] = [
        ["Episodes (done / failed)", f"{s.episodes} / {s.failed}"],
        ["Generations", s.generations],
        ["End-to-end latency p50 / p95 (s)", f"{secs(s.e2e_p50_s)} / {secs(s.e2e_p95_s)}"],
        ["Time to first token p50 / p95 (s)", f"{secs(s.ttft_p50_s)} / {secs(s.ttft_p95_s)}"],
        ["Decode speed median (tokens/s)", NM if s.decode_tps_median is None else f"{s.decode_tps_median:.1f}"],
        [
            "Prompt tokens mean / total",
            NM if s.prompt_tokens_mean is None else f"{s.prompt_tokens_mean:.0f} / {s.prompt_tokens_total}",
        ],
        [
            "Completion tokens mean / total",
            NM if s.completion_tokens_mean is None else f"{s.completion_tokens_mean:.1f} / {s.completion_tokens_total}",
        ],
        ["Replies cut at max_tokens", NM if s.cut_replies is None else f"{s.cut_replies} of {s.finish_reasons}"],
        ["Model load time (s)", NM if s.load_time_s is None else fmt(s.load_time_s, 2)],
        ["Peak process RSS", _gib(s.peak_rss_bytes)],
        ["GPU memory after load, over baseline", gpu_load],
        ["GPU memory peak (device used)", gpu_peak],
    ]
    return Table(title="Latency, tokens, memory", columns=["Measure", "Value"], rows=rows)


def energy_text(s: RunSummary) -> str:
    e = s.energy
    if e.per_episode_j is None:
        return f"{NM} ({e.reason})" if e.reason else NM
    return f"{e.per_episode_j:.3g}"


def correct_energy_text(s: RunSummary) -> str:
    e = s.energy
    if e.per_episode_j is None:
        return f"{NM} ({e.reason})" if e.reason else NM
    if e.per_correct_j is None:
        return f"{NM} (no correct episode among the measured ones)"
    return f"{e.per_correct_j:.3g} [{e.per_correct_low:.3g}, {e.per_correct_high:.3g}]"


def mbu_text(s: RunSummary) -> str:
    f = s.efficiency
    if f.mbu is None:
        return f"{NM} ({f.mbu_reason})" if f.mbu_reason else NM
    return f"{100 * f.mbu:.1f}%"


def _gbs(v: float | None) -> str:
    return NM if v is None else f"{v / 1e9:.2f} GB/s"


def efficiency_table(s: RunSummary) -> Table:
    """Energy beside the score, and how close decoding came to the memory's limit; "not measured" says why."""
    e, f = s.energy, s.efficiency
    source = NM if e.source is None else f"{e.source} (counter unit {e.resolution_j:g} J)"
    if e.source is None and e.reason:
        source += f" ({e.reason})"
    measured = f"{e.episodes} of {s.episodes}" + (f"; {e.attribution}" if e.attribution else "")
    mbu = mbu_text(s)
    if f.mbu is not None:
        per_token = (f.bytes_per_token or 0) / 1e6
        mbu += f" ({_gbs(f.decode_bytes_per_s)} of {_gbs(f.peak_bytes_per_s)}; {per_token:.1f} MB per token)"
    elif f.decode_bytes_per_s is not None:
        mbu += f"; achieved {_gbs(f.decode_bytes_per_s)}"
    if f.peak_note:  # beside the MBU: where the peak came from, and whether it is in doubt
        mbu += f"; {f.peak_note}"
    if f.mbu_nvml is not None:
        nvml = f"{100 * f.mbu_nvml:.1f}% (of {_gbs(f.peak_nvml_bytes_per_s)}, NVML's data sheet)"
    else:
        nvml = f"{NM} ({f.mbu_nvml_reason})" if f.mbu_nvml_reason else NM
    if f.prefill_flops_per_s is None:
        prefill = f"{NM} ({f.prefill_reason})" if f.prefill_reason else NM
    else:
        prefill = f"{f.prefill_flops_per_s / 1e9:.1f} GFLOP/s"
        share = f.prefill_share
        prefill += (
            f" of {(f.peak_flops_per_s or 0) / 1e9:.1f} ({100 * share:.1f}%)"
            if share is not None
            else f" (peak {NM}: {f.prefill_reason})"
        )
    rows: list[list[Any]] = [
        ["Energy counter", source],
        ["Episodes measured (attribution)", measured if e.episodes else NM],
        ["Energy per episode (J, net of idle)", energy_text(s)],
        ["Energy per correct episode (J, 95% CI)", correct_energy_text(s)],
        ["Energy per processed token (J)", NM if e.per_token_j is None else f"{e.per_token_j:.3g}"],
        ["Decode memory-bandwidth utilisation", mbu],
        ["Decode MBU against NVML's data-sheet bandwidth", nvml],
        ["Prefill achieved FLOP/s", prefill],
    ]
    return Table(title="Energy and memory bandwidth", columns=["Measure", "Value"], rows=rows)


def call_form_table(s: RunSummary) -> Table | None:
    """How the model wrote the calls that were read, and which forms only rig's loop reads."""
    c = s.call_forms
    if c is None:
        return None
    rows: list[list[Any]] = [
        [form, n, c.episodes.get(form, 0), "yes" if form in c.reference else "—" if form not in CALL_FORMS else "no"]
        for form, n in sorted(c.generations.items(), key=lambda kv: (kv[0] not in CALL_FORMS, -kv[1], kv[0]))
    ]
    text = f"Reference: {c.reference_note}." if c.reference_note else "The reference harness reads no call."
    if c.rig_only:
        text += (
            f" Read only by rig's loop: {', '.join(c.rig_only)}; {c.rig_only_episodes} of {s.episodes} episodes "
            "had such a call"
        )
        if c.rig_only_headline is not None and s.headline is not None and s.headline.samples:
            total = sum(x.score for x in s.headline.scores) / s.headline.samples
            text += f", contributing {c.rig_only_headline:.3f} of the headline mean {total:.3f}"
        text += " (the reference would have re-prompted or failed them)."
    else:
        text += " Every call read was in a form the reference reads."
    return Table(
        title="Tool-call forms",
        columns=["Form", "Generations", "Episodes", "Read by the reference"],
        rows=rows,
        note=text,
    )


def ci_table(s: RunSummary, label: str) -> Table | None:
    h = s.headline
    if h is None or h.mean is None:
        return None
    return Table(
        title="Headline score with 95% bootstrap CI" + (f" ({h.source})" if h.source else ""),
        columns=["Model", "Samples", "Mean", "CI low", "CI high"],
        rows=[[label, h.samples, h.mean, h.low, h.high]],
    )


def _placement(man: RunManifest) -> list[str]:
    """The report's line for a run whose GPU readings may be another device's than the model's."""
    gpu = man.gpu_memory
    if gpu is None or gpu.placement is None:
        return []
    return [f"- GPU memory and energy read on {gpu.watched()}, which may not be the model's device: {gpu.placement}"]


def grammar_backend(man: RunManifest) -> str:
    """Which engine machinery enforced the grammar, where the engine chose one (vLLM's structured-output backend,
    llama.cpp's native sampler or outlines), for a constrained run only."""
    backend = (man.engine_info or {}).get("constraint_backend")
    return f" (grammar backend: {backend})" if backend and man.config.decode != "none" else ""


def report_markdown(run_dir: Path) -> str:
    folder = RunFolder(run_dir)
    man = folder.manifest
    cfg = man.config
    spec = cfg.model
    out = [
        f"# rig report: {man.run_id}",
        "",
        f"- Model: **{spec.name}** ({spec.engine}, {spec.quantization}, context {spec.context_length})",
        (
            f"- Predictions made outside rig, re-scored by `rig rescore`; sampling not recorded; repeats {cfg.repeats}"
            if spec.engine == "external"
            else f"- Decode: {cfg.decode}{grammar_backend(man)}; tool mode: {cfg.tool_mode}; "
            f"temperature {cfg.temperature}; seed {cfg.seed}; repeats {cfg.repeats}"
        ),
        f"- Host: {man.host.cpu} ({man.host.cpu_count} CPUs); GPU: "
        f"{(man.gpu_memory.device_name if man.gpu_memory and man.gpu_memory.available else 'none')}",
        *_placement(man),
        f"- Status: {man.status}; rig {man.rig_version} ({(man.git_revision or 'no git')[:10]}); "
        f"versions: {', '.join(f'{k} {v}' for k, v in man.versions.items())}",
        "",
    ]
    for b in cfg.benchmarks:
        results = folder.results(b.name)
        expected = b.episodes * cfg.repeats
        out.append(f"## {b.name} (data {b.data_hash}, {len(results)} of {expected} episodes)\n")
        if len(results) < expected:
            out.append(
                f"_Incomplete run: {expected - len(results)} episode(s) missing; "
                f"resume with `rig bench --resume {man.run_id}`._\n"
            )
        for t in benchmark_tables(b, results, label=spec.name):
            out.append(table_md(t))
        summary = folder.summary(b.name)
        ci = ci_table(summary, spec.name)
        if ci:
            out.append(table_md(ci))
        out += [table_md(t) for t in (pass_k_table(summary), failure_table(summary)) if t is not None]
        forms = call_form_table(summary)
        if forms:
            out.append(table_md(forms))
        out.append(table_md(telemetry_table(summary)))
        out.append(table_md(efficiency_table(summary)))
    return "\n".join(out)
