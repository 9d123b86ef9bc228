"""`rig compare`: the same episodes on several variants, each in its own process, paired.

A variant is a model under a decode mode and a tool mode (`gemma3-270m@decode=json`, or every combination of the
models and `--decode none,json` / `--tool-mode` lists), so the same model with and without constrained decoding is a
comparison like two models are. Each variant runs as a separate `rig bench` process so GPU memory is clean and
measured from its own baseline.
The report pairs episodes by (episode id, repeat): accuracy with bootstrap CIs, paired differences against the
first variant, per-sample flips, latency, tokens, memory, and Pareto plots.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, Field, field_validator, model_validator

from rig.analyses.reliability import failure_compare_table, pass_k_compare_table, transition_tables
from rig.benchmarks.base import Table
from rig.execution.bench import BenchError
from rig.names import BadName
from rig.records import OutputError, claim_folder, write_atomic
from rig.render.plots import PlotsUnavailable, Point, pareto_plot, save_figure
from rig.render.report import NM, table_md
from rig.runfolder.config import RunConfig
from rig.runfolder.folder import RunFolder
from rig.runfolder.spec import RunSpec, axes
from rig.runfolder.summary import HeadlineScore, RunSummary
from rig.scoring.stats import paired_diff_ci


def _choices(axis: str) -> tuple[str, ...]:
    return get_args(RunSpec.model_fields[axis].annotation)


class Variant(BaseModel):
    """One arm of a comparison: a model, and its own value of any of the run settings' axes (decode, tool mode;
    `rig.runfolder.spec.axes`), the command's for those it leaves unset. ``Variant(model=m, decode="json")`` names
    an axis as the command line does."""

    model: str
    modes: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _axes_by_name(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        named = {k: data[k] for k in axes() if data.get(k) is not None}
        rest = {k: v for k, v in data.items() if k not in axes()}
        return {**rest, "modes": {**rest.get("modes", {}), **named}} if named else rest

    @field_validator("modes")
    @classmethod
    def _known(cls, modes: dict[str, str]) -> dict[str, str]:
        for key, value in modes.items():
            if key not in axes() or value not in _choices(key):
                raise ValueError(f"{key}={value!r}: not a setting a variant can have")
        return modes

    @property
    def label(self) -> str:
        modes = [f"{k}={self.modes[k]}" for k in axes() if k in self.modes]
        return self.model + ("@" + ",".join(modes) if modes else "")


def parse_variant(spec: str) -> Variant:
    """`MODEL` or `MODEL@decode=json,tool_mode=native`; a bad key or value is a BenchError naming it."""
    model, _, rest = spec.partition("@")
    modes: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in axes():
            form = ",".join(f"{a}=..." for a in axes())
            raise BenchError(f"variant {spec!r}: expected MODEL@{form} (got {item!r})")
        if value.strip() not in _choices(key):
            raise BenchError(f"variant {spec!r}: {key} {value.strip()!r}; choose {', '.join(_choices(key))}")
        modes[key] = value.strip()
    if not model.strip():
        raise BenchError(f"variant {spec!r}: no model name before '@'")
    return Variant(model=model.strip(), modes=modes)


def expand_variants(specs: list[str], *lists: list[str] | None) -> list[Variant]:
    """Every variant spec under every listed value of each axis (``lists`` in the order of `axes`: decodes, tool
    modes; None or empty: the command's one value); a spec's own `@...` settings win."""
    per_axis: list[list[tuple[str, str | None]]] = [
        [(axis, v) for v in values] if values else [(axis, None)] for axis, values in zip(axes(), lists, strict=False)
    ]
    out: list[Variant] = []
    for spec in specs:
        v = parse_variant(spec)
        for combo in itertools.product(*per_axis):
            extra = {k: x for k, x in combo if x is not None and k not in v.modes}
            out.append(v.model_copy(update={"modes": {**v.modes, **extra}}))
    labels = [v.label for v in out]
    if len(set(labels)) != len(labels):
        raise BenchError(f"the same variant is listed twice: {', '.join(labels)}")
    return out


def cell_spec(variant: Variant | str, o: RunSpec) -> RunSpec:
    """The spec of one variant's run: the command's settings under the variant's model and modes, with one seed for
    all (so --limit samples the same questions and pairs line up)."""
    v = variant if isinstance(variant, Variant) else Variant(model=variant)
    fields = {k: val for k, val in o.model_dump(include=set(RunSpec.model_fields)).items() if val is not None}
    fields.update(model=v.model, seed=o.seeded().seed)
    if "decode" in v.modes and "tool_mode" not in v.modes:
        # A variant's decode mode without a tool mode gets bench's own rule for it (--decode json constrains the
        # tool calls too), not the command's tool mode, which followed the command's decode.
        fields.pop("tool_mode", None)
    return RunSpec.model_validate(fields | v.modes)


def variant_labels(run_dirs: list[Path]) -> list[str]:
    """Names for the runs in tables and plots: the model, plus the decode / tool mode where those differ."""
    cfgs = [RunFolder(d).manifest.config for d in run_dirs]
    keys = [k for k in axes() if len({getattr(c, k) for c in cfgs}) > 1]
    return [c.model.name + ("@" + ",".join(f"{k}={getattr(c, k)}" for k in keys) if keys else "") for c in cfgs]


def judged_note(labelled: list[tuple[str, RunSummary]]) -> str:
    """Who gave each run's headline numbers where a judge did (UrbanGeoEval's reasoning totals), so a comparison of
    self-judged scores says so; "" when every headline was scored by program."""
    said = [f"{label}: {s.headline.source}" for label, s in labelled if s.headline and s.headline.source]
    return f"Headline scores given by a judge: {'; '.join(said)}. " if said else ""


def run_summary(run_dir: Path) -> RunSummary:
    """The variant's first (in practice only) benchmark, with its headline score per episode for pairing."""
    folder = RunFolder(run_dir)
    return folder.summary(folder.benchmarks[0].name)


def gib(b: int | None) -> float | None:
    return None if b is None else b / 2**30


def paired(
    base: dict[tuple[str, int], float], other: dict[tuple[str, int], float], keys: list[tuple[str, int]]
) -> list[float | int | None]:
    """Paired samples, mean difference (other - base) with its bootstrap CI, flips to correct, flips to wrong."""
    a, b = [base[k] for k in keys], [other[k] for k in keys]
    d = lo = hi = None
    if len(keys) >= 2:
        d, lo, hi = paired_diff_ci(a, b)
    worse = sum(1 for x, y in zip(a, b, strict=True) if x >= 0.5 > y)
    better = sum(1 for x, y in zip(a, b, strict=True) if x < 0.5 <= y)
    return [len(keys), d, lo, hi, better, worse]


def compare_report(run_dirs: list[Path]) -> tuple[str, dict[str, Any]]:
    """Markdown and figures (file stem -> matplotlib Figure) for runs of the same benchmark."""
    folders = [RunFolder(d) for d in run_dirs]
    sums = [f.summary(f.benchmarks[0].name) for f in folders]
    labels = variant_labels(run_dirs)
    cfgs = [f.manifest.config for f in folders]
    scores = [s.headline.by_episode() if s.headline else {} for s in sums]
    base = scores[0]
    common = set(base).intersection(*[set(s) for s in scores[1:]])
    warn = ""
    if any(set(s) != set(base) for s in scores[1:]):
        warn = f"Runs cover different episodes; paired statistics use the {len(common)} common ones."
    keys = sorted(common)
    t1 = _variants_table(sums, labels, cfgs, warn)
    t2 = Table(
        title=f"Paired differences against {labels[0]}",
        columns=["Model", "Paired samples", "Mean diff", "CI low", "CI high", "Flips to correct", "Flips to wrong"],
        rows=[[label, *paired(base, sc, keys)] for sc, label in list(zip(scores, labels, strict=True))[1:]],
        note="A flip compares per-episode scores at 0.5 (correct / wrong).",
    )
    t3 = efficiency_compare_table(sums, labels)
    stored = [{(r.episode_id, r.repeat) for r in f.results(f.benchmarks[0].name)} for f in folders]
    reliability = [pass_k_compare_table(sums, labels), failure_compare_table(sums, labels)]
    reliability += transition_tables(sums, labels, stored)
    figs, plots_md = _figures(sums, labels)
    tables = [t1, t2, t3, *(t for t in reliability if t is not None)]
    md = "\n".join([f"# rig compare ({len(sums)} variants)", "", *map(table_md, tables), *plots_md])
    return md, figs


def _variants_table(sums: list[RunSummary], labels: list[str], cfgs: list[RunConfig], warn: str) -> Table:
    rows = []
    for s, label, cfg in zip(sums, labels, cfgs, strict=True):
        h = s.headline or HeadlineScore(samples=0)
        rows.append(
            [
                label,
                s.quantization,
                h.samples,
                h.mean,
                h.low,
                h.high,
                s.e2e_p50_s,
                s.e2e_p95_s,
                s.ttft_p50_s,
                s.decode_tps_median,
                s.completion_tokens_mean,
                NM if s.cut_share is None else s.cut_share,
                NM if s.gpu_peak_bytes is None else gib(s.gpu_peak_bytes),
                gib(s.peak_rss_bytes),
                s.load_time_s,
                cfg.decode,
                cfg.tool_mode,
            ]
        )
    return Table(
        title="Variants",
        columns=[
            "Model",
            "Quant",
            "Samples",
            "Accuracy",
            "CI low",
            "CI high",
            "E2E p50 (s)",
            "E2E p95 (s)",
            "TTFT p50 (s)",
            "Decode tok/s",
            "Completion tokens",
            "Cut at max_tokens",
            "GPU peak (GiB)",
            "RSS peak (GiB)",
            "Load (s)",
            "Decode",
            "Tool mode",
        ],
        rows=rows,
        note="Accuracy = the benchmark's headline per-episode score, 95% bootstrap CI. "
        + judged_note(list(zip(labels, sums, strict=True)))
        + warn,
    )


def _figures(sums: list[RunSummary], labels: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The Pareto figures (score against latency, memory and, where measured, energy) and their markdown lines."""
    on_gpu = all(s.gpu_peak_bytes is not None for s in sums)
    mem_axis = "GPU peak (GiB)" if on_gpu else "process RSS peak (GiB)"

    def point(s: RunSummary, label: str, x: float | None) -> Point:
        h = s.headline
        return Point(
            label=label, x=x, y=h.mean if h else None, y_low=h.low if h else None, y_high=h.high if h else None
        )

    figs: dict[str, Any] = {}
    try:
        figs["pareto_latency"] = pareto_plot(
            [point(s, lab, s.e2e_p50_s) for s, lab in zip(sums, labels, strict=True)],
            "end-to-end latency p50 (s)",
            "headline score (95% CI)",
            "Score against latency",
        )
        figs["pareto_memory"] = pareto_plot(
            [
                point(s, lab, gib(s.gpu_peak_bytes if on_gpu else s.peak_rss_bytes))
                for s, lab in zip(sums, labels, strict=True)
            ],
            mem_axis,
            "headline score (95% CI)",
            "Score against memory",
        )
        plots_md = [
            "![score vs latency](pareto_latency.svg)",
            "",
            "![score vs memory](pareto_memory.svg)",
            "",
        ]
        if any(s.energy.per_episode_j is not None for s in sums):
            figs["pareto_energy"] = pareto_plot(
                [point(s, lab, s.energy.per_episode_j) for s, lab in zip(sums, labels, strict=True)],
                "energy per episode (J, net of idle)",
                "headline score (95% CI)",
                "Score against energy",
            )
            plots_md += ["![score vs energy](pareto_energy.svg)", ""]
        else:
            plots_md += ["_Score against energy: not measured in any variant (see the energy table)._", ""]
        plots_md += [
            "_Each figure is also written as PDF and PNG beside this file._",
            "",
        ]
    except PlotsUnavailable as e:
        plots_md = [f"_No figures: {e}._", ""]
    return figs, plots_md


def efficiency_compare_table(sums: list[RunSummary], labels: list[str]) -> Table:
    """Energy and decode MBU per variant: which quantization is memory-bound, and what a correct answer costs."""
    rows = []
    for s, label in zip(sums, labels, strict=True):
        e, f = s.energy, s.efficiency
        why = [w for w in (e.reason if e.per_episode_j is None else None, f.mbu_reason) if w]
        rows.append(
            [
                label,
                s.quantization,
                NM if e.per_episode_j is None else e.per_episode_j,
                NM if e.per_correct_j is None else e.per_correct_j,
                NM if e.per_correct_low is None else e.per_correct_low,
                NM if e.per_correct_high is None else e.per_correct_high,
                NM if f.mbu is None else f.mbu,
                NM if f.decode_bytes_per_s is None else f.decode_bytes_per_s / 1e9,
                NM if f.bytes_per_token is None else f.bytes_per_token / 1e6,
                NM if f.prefill_flops_per_s is None else f.prefill_flops_per_s / 1e9,
                f.peak_note if f.mbu is not None or f.peak_wrong else "",
                "; ".join(dict.fromkeys(why)) or "",
            ]
        )
    return Table(
        title="Energy and memory bandwidth",
        columns=[
            "Model",
            "Quant",
            "J/episode",
            "J/correct",
            "CI low",
            "CI high",
            "Decode MBU",
            "Decode GB/s",
            "MB/token",
            "Prefill GFLOP/s",
            "MBU peak (source; doubts)",
            "Not measured because",
        ],
        rows=rows,
        note="Energy net of the idle baseline; J/correct = energy over the sum of headline scores, 95% bootstrap CI. "
        "Decode MBU = bytes read per token (weights touched + KV cache) x decode tokens/s / the probed peak read "
        "bandwidth: near 1, decoding is memory-bound; far below, the kernel (not the memory) limits it. A peak probed "
        "under load reads low and every MBU against it high: its source and doubts are shown beside it.",
    )


def compare_folder(out: Path, run_dirs: list[Path]) -> Path:
    """A new comparison folder for existing runs of one benchmark; the runs are checked first, so bad input leaves
    nothing behind."""
    if len(run_dirs) < 2:
        raise BenchError("rig compare --run needs at least two run folders")
    if len({Path(d).resolve() for d in run_dirs}) != len(run_dirs):
        raise BenchError("rig compare --run: the same run folder is given twice; a run compared with itself")
    names = set()
    for d in run_dirs:
        try:
            man = RunFolder(d).manifest
        except ValueError as e:  # none, a newer format, or a manifest that does not validate: the file is named
            raise BenchError(str(e).splitlines()[0]) from None
        if not man.config.benchmarks:
            raise BenchError(f"{Path(d) / 'manifest.json'}: config.benchmarks: the run holds no benchmark to compare")
        names.add(man.config.benchmarks[0].name)
    if len(names) != 1:
        raise BenchError(f"the runs are of different benchmarks ({', '.join(sorted(names))}); compare one at a time")
    return claim_compare_folder(out, f"compare-{time.strftime('%Y%m%d-%H%M%S')}-{names.pop()}")


def claim_compare_folder(out: Path, name: str) -> Path:
    try:
        return claim_folder(out, name)
    except (OutputError, BadName) as e:
        raise BenchError(str(e)) from None


RUNS_FILE = "runs.json"  # a comparison folder's run folders, in the order compared


def read_compare_runs(cdir: Path) -> list[Path] | None:
    """The run folders a comparison compared (its runs.json), or None for a folder written before it existed."""
    from rig.inputs import read_json

    path = cdir / RUNS_FILE
    if not path.is_file():
        return None
    found = read_json(path)  # bounded (rig.inputs), an InputError (a ValueError) naming it
    if not isinstance(found, list) or not all(isinstance(x, str) for x in found):
        raise ValueError(f"{path}: expected a list of run folder paths")
    return [Path(x) for x in found]


def write_compare(cdir: Path, run_dirs: list[Path], extra: str | None = None, extra_html: str = "") -> str:
    """compare.md (with ``extra``, a further section such as the divergence tables, at its end), compare.html (with
    ``extra_html`` after its dashboard: the divergence section), each figure as SVG, PDF and PNG, and ``runs.json``
    (the compared run folders, in order: what `rig export CDIR --mlflow` reads) in the comparison folder."""
    from rig.render.html import html_report

    md, figs = compare_report(run_dirs)
    write_atomic(cdir / RUNS_FILE, json.dumps([str(Path(d).resolve()) for d in run_dirs], indent=1) + "\n")
    if extra:
        md = md.rstrip("\n") + "\n\n" + extra
    for stem, fig in figs.items():
        save_figure(fig, cdir, stem)
    write_atomic(cdir / "compare.md", md)
    write_atomic(cdir / "compare.html", html_report(run_dirs, extra=extra_html))  # the dashboard: runs side by side
    return md
