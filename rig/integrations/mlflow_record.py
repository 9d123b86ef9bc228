"""What one rig run gives MLflow, computed from its folder alone (`RunFolder`: the manifest, each benchmark's
`RunSummary` and report tables), never recomputed and without talking to MLflow: params are the run's `RunSpec` and
model facts (the weights' sha256 among them), metrics each benchmark's headline with its CI, every number of its
paper tables, latency, tokens, memory, energy and MBU; a value that was not measured is left out and a
``rig.not_measured.<metric>`` tag says why (never a 0). Per-episode scores are step metrics (step = the episode's
place in the run's key order) and ``episodes.csv``; the artifacts are report.md, report.html, the figures and
manifest.json. Sending it is `rig.integrations.mlflow`'s job.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rig.inputs import file_kind
from rig.records import hash_view
from rig.runfolder.folder import RunFolder
from rig.runfolder.summary import RunSummary

NOT_MEASURED = "rig.not_measured."  # + metric key: why the metric is absent
# MLflow's own limits (param values, keys)
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_KEY = 250

Kind = Literal["run", "compare", "load", "sweep"]


class MlflowExportError(Exception):
    """An export that could not complete: the message names the server or the run and says how to finish it."""


class ExportRecord(BaseModel):
    """What one MLflow run receives, computed from a run (or group) folder without talking to MLflow."""

    key: str  # what identifies it across exports: the run id, or "group id/run id"
    name: str  # the MLflow run name
    kind: Kind = "run"
    params: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)
    steps: dict[str, list[tuple[int, float]]] = Field(default_factory=dict)  # per-episode scores
    tags: dict[str, str] = Field(default_factory=dict)
    artifacts: dict[str, Path] = Field(default_factory=dict)  # artifact path -> local file


def own_file(folder: Path, rel: str) -> Path | None:
    """``folder/rel`` when it is a regular file of the folder itself, None when it is absent; a symbolic link on the
    way (the file or a folder such as figures/) or anything but a regular file is refused, naming it, so an export
    never uploads what a link in a run folder points to."""
    path = folder
    for part in Path(rel).parts:
        path = path / part
        try:
            st = path.lstat()
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise _link_refused(path, folder, "file" if part == Path(rel).parts[-1] else "folder")
    if not stat.S_ISREG(st.st_mode):
        raise MlflowExportError(f"{path}: is {file_kind(st.st_mode)}, not a regular file; it is not exported")
    return path


def _link_refused(path: Path, folder: Path, what: str) -> MlflowExportError:
    return MlflowExportError(
        f"{path}: is a symbolic link; rig exports only the files inside {folder}, never what a link points to: "
        f"replace the link with the {what} itself, or remove it"
    )


def own_files(folder: Path, sub: str, suffixes: tuple[str, ...] | None = None) -> dict[str, Path]:
    """The regular files directly in ``folder/sub`` (``sub`` "" for the folder itself), by their artifact path;
    ``suffixes``: only those (figures). A link among them is refused, as ``own_file`` does."""
    where = folder / sub if sub else folder
    if sub and own_dir(folder, sub) is None:
        return {}
    out: dict[str, Path] = {}
    for p in sorted(where.iterdir()):
        if suffixes is not None and p.suffix not in suffixes:
            continue
        if p.is_dir() and not p.is_symlink():
            continue
        rel = f"{sub}/{p.name}" if sub else p.name
        found = own_file(folder, rel)
        if found is not None:
            out[rel] = found
    return out


def own_dir(folder: Path, sub: str) -> Path | None:
    """``folder/sub`` when it is a real folder inside ``folder`` (not a link to one), else None; a link is refused."""
    path = folder / sub
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _link_refused(path, folder, "folder")
    return path if stat.S_ISDIR(st.st_mode) else None


# -- names ---------------------------------------------------------------------------------------------------------

_BAD_CHARS = re.compile(r"[^A-Za-z0-9_\-. /:]")


def metric_key(*parts: object) -> str:
    """An MLflow metric (or tag) key from parts joined by '/': characters MLflow refuses become '_', a part that is
    empty, '.' or '..' becomes '_' (MLflow keys must be normalised paths), and a key past 250 characters is cut and
    ends in a hash of the whole, so two long keys stay apart."""
    clean = []
    for p in parts:
        text = _BAD_CHARS.sub("_", str(p)).strip()
        clean.append("_" if text in ("", ".", "..") else text)
    key = "/".join(clean)
    if len(key) > MAX_KEY:
        key = key[: MAX_KEY - 13] + "~" + hashlib.sha256(key.encode()).hexdigest()[:12]
    return key


def as_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)


def clip(text: str, limit: int, where: str) -> str:
    return text if len(text) <= limit else text[: limit - 60] + f" ... (cut; the whole value is in {where})"


# -- what a run gives MLflow -----------------------------------------------------------------------------------------


def run_params(folder: RunFolder) -> dict[str, str]:
    """The run's settings (its RunSpec, as recorded or rebuilt for an older manifest) and the facts of its model,
    host and rig: the same value from the same folder on every export."""
    man = folder.manifest
    out: dict[str, Any] = {}
    for k, v in man.run_spec().model_dump(mode="json", exclude_none=True).items():
        out[f"spec.{k}"] = v
    m = man.config.model
    for k in ("name", "base", "variant", "engine", "quantization", "context_length", "chat_format", "thinking"):
        if getattr(m, k) is not None:
            out[f"model.{k}"] = getattr(m, k)
    out["model.weights"] = m.weights.model_dump(mode="json", exclude_none=True)
    # as hashes read it: a field added later is absent while unset, so a run exported before keeps its params
    # (MLflow refuses a changed param on re-export)
    out["model.sampling"] = hash_view(m.sampling)
    if m.engine_args:
        out["model.engine_args"] = m.engine_args
    if man.weights_sha256:
        out["weights_sha256"] = man.weights_sha256
    out["run.config_hash"] = man.config_hash
    out["rig.version"] = man.rig_version
    if man.git_revision:
        out["rig.git_revision"] = man.git_revision
    if man.bundle_id:
        out["rig.bundle_id"] = man.bundle_id
    for k, v in man.host.model_dump(mode="json", exclude_none=True).items():
        out[f"host.{k}"] = v
    gpu = man.gpu_memory
    if gpu is not None and gpu.available:
        for k in ("device_name", "device_uuid", "driver", "total_bytes"):
            if getattr(gpu, k) is not None:
                out[f"gpu.{k}"] = getattr(gpu, k)
    for name, version in man.versions.items():
        out[f"version.{name}"] = version
    for b in man.config.benchmarks:
        for k in ("version", "data_hash", "data_path", "episodes", "options"):
            out[f"benchmark.{b.name}.{k}"] = getattr(b, k)
    allowed = getattr(man, "allowed_hosts", None)
    if allowed:
        out["offline.allowed_hosts"] = ",".join(allowed)
    return {metric_key(k): clip(as_text(v), MAX_PARAM_VALUE, "manifest.json") for k, v in out.items()}


_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def _finite(v: Any) -> float | None:
    """A finite number, or a table cell holding one as text (a count a table formatted itself); else None."""
    if isinstance(v, str) and _NUMBER.fullmatch(v.strip()):
        v = float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def summary_metrics(prefix: str, s: RunSummary) -> tuple[dict[str, float], dict[str, str]]:
    """A benchmark's measures from its RunSummary, and for each one not measured the reason (no metric for it)."""
    h, e, f = s.headline, s.energy, s.efficiency
    if h is None:
        no_headline = "summarised without the benchmark's headline score"
    elif h.samples == 0:
        no_headline = "no episode was scored"
    else:
        no_headline = "one scored episode: no interval" if h.mean is None else ""
    single = h.scores[0].score if h is not None and h.samples == 1 else None
    no_energy = e.reason or "not measured"
    no_mbu = f.mbu_reason or "not measured"
    never = "no generation recorded it"
    values: list[tuple[str, Any, str]] = [
        ("headline", h.mean if h and h.mean is not None else single, no_headline),
        ("headline_ci_low", h.low if h else None, no_headline or "no interval"),
        ("headline_ci_high", h.high if h else None, no_headline or "no interval"),
        ("headline_samples", h.samples if h else None, no_headline),
        ("episodes", s.episodes, ""),
        ("episodes_expected", s.expected_episodes, ""),
        ("episodes_failed", s.failed, ""),
        ("generations", s.generations, ""),
        ("e2e_p50_s", s.e2e_p50_s, never),
        ("e2e_p95_s", s.e2e_p95_s, never),
        ("ttft_p50_s", s.ttft_p50_s, never),
        ("ttft_p95_s", s.ttft_p95_s, never),
        ("decode_tps_median", s.decode_tps_median, never),
        ("prompt_tokens_mean", s.prompt_tokens_mean, never),
        ("prompt_tokens_total", s.prompt_tokens_total, never),
        ("completion_tokens_mean", s.completion_tokens_mean, never),
        ("completion_tokens_total", s.completion_tokens_total, never),
        ("replies_cut", s.cut_replies, "no engine reported why its replies stopped"),
        ("load_time_s", s.load_time_s, "not recorded in the manifest"),
        ("peak_rss_bytes", s.peak_rss_bytes, "not recorded in the manifest"),
        ("gpu_load_bytes", s.gpu_load_bytes, s.gpu_unavailable or "not recorded"),
        ("gpu_peak_bytes", s.gpu_peak_bytes, s.gpu_unavailable or "not recorded"),
        ("energy_total_j", e.total_j, no_energy),
        ("energy_per_episode_j", e.per_episode_j, no_energy),
        ("energy_per_token_j", e.per_token_j, no_energy),
        ("energy_per_correct_j", e.per_correct_j, no_energy if e.total_j is None else "no correct episode measured"),
        ("energy_per_correct_ci_low", e.per_correct_low, no_energy if e.total_j is None else "no interval"),
        ("energy_per_correct_ci_high", e.per_correct_high, no_energy if e.total_j is None else "no interval"),
        ("decode_mbu", f.mbu, no_mbu),
        ("decode_mbu_nvml", f.mbu_nvml, no_mbu if f.mbu is None else "no NVML data-sheet bandwidth (a CPU run)"),
        ("decode_bytes_per_s", f.decode_bytes_per_s, no_mbu),
        ("prefill_flops_per_s", f.prefill_flops_per_s, f.prefill_reason or "not measured"),
        *reliability_values(s),
    ]
    metrics, reasons = {}, {}
    for name, v, why in values:
        key = metric_key(prefix, name)
        value = _finite(v)
        if value is None:
            reasons[key] = why or "not measured"
        else:
            metrics[key] = value
    return metrics, reasons


def reliability_values(s: RunSummary) -> list[tuple[str, Any, str]]:
    """pass^k and pass@k (``pass_hat_<k>``, ``pass_at_<k>``) with their CIs per k asked for, a k not measured with
    its reason; and the failure taxonomy's episodes per class (``failures_<class>``)."""
    r, out = s.reliability, []
    if r is not None:
        rows = {p.k: p for p in r.rows}
        for k in r.ks:
            p, why = rows.get(k), r.reason or "not measured"
            for name in ("pass_hat", "pass_at"):
                mean, low, high = (getattr(p, f) for f in (name, f"{name}_low", f"{name}_high")) if p else (None,) * 3
                out += [
                    (f"{name}_{k}", mean, why),
                    (f"{name}_{k}_ci_low", low, why),
                    (f"{name}_{k}_ci_high", high, why),
                ]
    if s.failures is not None:
        out += [(f"failures_{c}", n, "") for c, n in s.failures.classes().items()]
    return out


def table_metrics(prefix: str, tables: Iterable[Any]) -> dict[str, float]:
    """Every number of a benchmark's report tables (the paper's layout): ``<benchmark>/table/<title>/<row>/<column>``,
    the row named by its text cells; a blank cell (a task not run) gives no metric."""
    out: dict[str, float] = {}
    for t in tables:
        for row in t.rows:
            label = [str(c) for c in row if c is not None and _finite(c) is None]
            for column, cell in zip(t.columns, row, strict=False):
                value = _finite(cell)
                if value is None:
                    continue
                key = metric_key(prefix, "table", t.title, *label, column)
                n = 2
                while key in out:  # two rows with the same text cells: numbered in table order
                    key = metric_key(prefix, "table", t.title, *label, f"{column} #{n}")
                    n += 1
                out[key] = value
    return out


def episode_steps(prefix: str, folder: RunFolder, benchmark: str) -> dict[str, list[tuple[int, float]]]:
    """Per-episode scores under the benchmark's metric names, one step per stored (episode, repeat) in key order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for step, r in enumerate(folder.results(benchmark)):
        for name, v in r.scores.items():
            value = _finite(v)
            if value is not None:
                out.setdefault(metric_key(prefix, "episode", name), []).append((step, value))
    return out


def run_record(folder: RunFolder, files: Path, key: str | None = None, name: str | None = None) -> ExportRecord:
    """Everything an MLflow run receives from one rig run. Files the folder lacks (report.md and report.html of a
    `--no-report` run, such as a comparison's variants) and episodes.csv are rendered into ``files``, never into
    the run folder."""
    from rig.benchmarks import benchmark_tables
    from rig.render.export import episode_rows, write_rows

    man = folder.manifest
    rec = ExportRecord(key=key or man.run_id, name=name or man.run_id, params=run_params(folder))
    reasons: dict[str, str] = {}
    for b in folder.benchmarks:
        metrics, why = summary_metrics(b.name, folder.summary(b.name))
        rec.metrics.update(metrics)
        reasons.update(why)
        rec.metrics.update(table_metrics(b.name, benchmark_tables(b, folder.results(b.name), man.config.model.name)))
        rec.steps.update(episode_steps(b.name, folder, b.name))
    rec.tags = {
        "rig.run_id": man.run_id,
        "rig.kind": "run",
        "rig.status": man.status,
        "rig.model": man.config.model.name,
        "rig.benchmarks": ",".join(b.name for b in folder.benchmarks),
        "mlflow.source.name": "rig",
        **{NOT_MEASURED + k: clip(v, MAX_TAG_VALUE, "report.md") for k, v in reasons.items()},
    }
    if "weights_sha256" not in rec.params:
        rec.tags[NOT_MEASURED + "weights_sha256"] = (
            man.weights_sha256_reason or "the run's manifest records no weights hash (written before rig hashed them)"
        )
    files.mkdir(parents=True, exist_ok=True)
    manifest = own_file(folder.path, "manifest.json")
    rec.artifacts = {"manifest.json": manifest} if manifest is not None else {}
    md, html = own_file(folder.path, "report.md"), own_file(folder.path, "report.html")
    if md is not None and html is not None:
        rec.artifacts.update({"report.md": md, "report.html": html, **own_files(folder.path, "figures")})
    else:
        rec.artifacts.update(_rendered_report(folder.path, files))
    rows = episode_rows(folder.path)
    write_rows(rows, list(dict.fromkeys(k for r in rows for k in r)), "csv", files / "episodes.csv")
    rec.artifacts["episodes.csv"] = files / "episodes.csv"
    return rec


def _rendered_report(run_dir: Path, files: Path) -> dict[str, Path]:
    from rig.records import write_atomic
    from rig.render.html import html_report
    from rig.render.report import report_markdown

    write_atomic(files / "report.md", report_markdown(run_dir))
    write_atomic(files / "report.html", html_report([run_dir]))
    return {"report.md": files / "report.md", "report.html": files / "report.html"}
