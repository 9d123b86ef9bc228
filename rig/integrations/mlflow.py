"""rig results on an MLflow tracking server: one MLflow run per rig run, a parent run with nested ones for a
comparison, a load test or a sweep.

What a run gives MLflow is computed from its folder alone (`RunFolder`: the manifest, each benchmark's `RunSummary`
and report tables), never recomputed here: params are the run's `RunSpec` and model facts, metrics each benchmark's
headline with its CI, every number of its paper tables, latency, tokens, memory, energy and MBU; a value that was not
measured is left out and a ``rig.not_measured.<metric>`` tag says why (never a 0). Per-episode scores are step
metrics (step = the episode's place in the run's key order) and ``episodes.csv``; the artifacts are report.md,
report.html, the figures, manifest.json (and a group's own files).

Idempotent: the MLflow run is found by a tag (``rig.export_key``: the run id, or group and run id for a nested one)
before one is created, and only what differs is sent (params present with the same value, metrics whose latest value
is the same, artifacts whose recorded sha256 matches are skipped), so exporting twice changes nothing and an
interrupted export (server down, an HTTP error, a signal) completes on the next try. The run folder is only read.

The tracking URI passes the offline guard first (`rig.offline.check_url`): loopback, ``file:`` or a lab host allowed
with ``--allow-host HOST:PORT`` / ``RIG_ALLOW_HOSTS``; anything else is refused before any connection.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import posixpath
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rig import offline
from rig.runfolder.folder import RunFolder
from rig.runfolder.summary import RunSummary

DEFAULT_EXPERIMENT = "rig"
EXPORT_KEY = "rig.export_key"  # the tag an export finds its MLflow run by
NOT_MEASURED = "rig.not_measured."  # + metric key: why the metric is absent
ARTIFACT_SHA = "rig.artifact_sha256."  # + artifact path: the sha256 of what was uploaded there
# MLflow's own limits (param values, keys, entities per log_batch call)
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_KEY = 250
BATCH_METRICS, BATCH_PARAMS, BATCH_TAGS = 1000, 100, 100
# A down server should fail in seconds, not after MLflow's default seven retries with exponential backoff; a lab
# that wants more sets these variables itself.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}

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


class ExportResult(BaseModel):
    mlflow_run_id: str
    experiment_id: str
    changed: bool  # False: the server already held everything (a repeated export)
    children: list[ExportResult] = Field(default_factory=list)


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


def export_key_value(key: str) -> str:
    """The ``rig.export_key`` tag value: a hash, so any run id or label is safe inside a search filter."""
    return hashlib.sha256(key.encode()).hexdigest()[:40]


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)


def _cut(text: str, limit: int, where: str) -> str:
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
    out["model.sampling"] = m.sampling.model_dump(mode="json")
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
    return {metric_key(k): _cut(_value(v), MAX_PARAM_VALUE, "manifest.json") for k, v in out.items()}


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
        **{NOT_MEASURED + k: _cut(v, MAX_TAG_VALUE, "report.md") for k, v in reasons.items()},
    }
    if "weights_sha256" not in rec.params:
        rec.tags[NOT_MEASURED + "weights_sha256"] = (
            man.weights_sha256_reason or "the run's manifest records no weights hash (written before rig hashed them)"
        )
    files.mkdir(parents=True, exist_ok=True)
    rec.artifacts = {"manifest.json": folder.path / "manifest.json"}
    if (folder.path / "report.md").is_file() and (folder.path / "report.html").is_file():
        rec.artifacts["report.md"] = folder.path / "report.md"
        rec.artifacts["report.html"] = folder.path / "report.html"
        figures = folder.path / "figures"
        if figures.is_dir():
            rec.artifacts.update({f"figures/{p.name}": p for p in sorted(figures.iterdir()) if p.is_file()})
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


# -- groups: a comparison, a load test, a sweep ---------------------------------------------------------------------

FIGURE_SUFFIXES = (".svg", ".pdf", ".png")


class Group(BaseModel):
    """A folder of several runs: its kind, its id, its runs (label, folder) in order, its own files and params."""

    kind: Kind
    id: str
    runs: list[tuple[str, Path]]
    files: dict[str, Path] = Field(default_factory=dict)
    params: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)


def _own_files(folder: Path, names: Iterable[str]) -> dict[str, Path]:
    """The group's own files that exist, and its figures (SVG, PDF, PNG written beside them) under figures/."""
    out = {n: folder / n for n in names if (folder / n).is_file()}
    figures = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in FIGURE_SUFFIXES)
    out.update({f"figures/{p.name}": p for p in figures})
    return out


def compare_group(cdir: Path, runs: list[Path] | None = None) -> Group:
    """A comparison folder: its variants' runs (given, or those under its runs/ in the order they ran, or those its
    divergence pass read), compare.md, compare.html, the figures and the divergence tables."""
    from rig.analyses.compare import read_compare_runs, variant_labels

    if runs is None:
        runs = read_compare_runs(cdir)
    if runs is None:  # written before runs.json: the variants' runs under runs/, in the order they ran
        runs = sorted(p.parent for p in (cdir / "runs").glob("*/manifest.json"))
        if not runs and (cdir / "divergence.json").is_file():
            from rig.analyses.divergence.output import read_report

            rep = read_report(cdir)
            runs = [Path(rep.settings.reference_run), *(Path(v.run) for v in rep.settings.variants if v.run)]
    if not runs:
        raise MlflowExportError(
            f"{cdir}: a comparison of existing runs (rig compare --run) does not record its runs; export it with "
            "`rig compare --run A --run B --mlflow URI`, or each run with `rig export RUN --mlflow URI`"
        )
    labels = variant_labels(runs)
    files = _own_files(
        cdir, ("compare.md", "compare.html", "divergence.csv", "divergence_episodes.csv", "divergence.json")
    )
    params = {"compare.variants": _cut(json.dumps(labels), MAX_PARAM_VALUE, "compare.md")}
    return Group(kind="compare", id=cdir.name, runs=list(zip(labels, runs, strict=True)), files=files, params=params)


def load_group(ldir: Path) -> Group:
    """A load folder: each level's run (plan.json), load.md, load.html, load.json, the figure; the verdict."""
    from rig.analyses.load.records import LoadReport
    from rig.analyses.load.run import LoadPlan

    plan = LoadPlan.model_validate_json((ldir / "plan.json").read_text())
    runs = [(f"concurrency {level}", ldir / "runs" / rid) for level, rid in sorted(plan.runs.items())]
    s = plan.settings
    params = {
        "load.levels": ",".join(map(str, s.levels)),
        "load.margin": str(s.margin),
        "load.slos": _value([slo.model_dump(mode="json") for slo in s.slos]),
    }
    metrics = {}
    if (ldir / "load.json").is_file():
        rep = LoadReport.model_validate_json((ldir / "load.json").read_text())
        if rep.verdict.level is not None:
            metrics["load/verdict_level"] = float(rep.verdict.level)
    files = _own_files(ldir, ("load.md", "load.html", "load.json"))
    return Group(kind="load", id=ldir.name, runs=runs, files=files, params=params, metrics=metrics)


def sweep_group(sdir: Path, cells: dict[str, str | None] | None = None) -> Group:
    """A sweep folder: each cell's run (the merged one of a sharded cell), leaderboard.md and .html, the figures."""
    from rig.sweep.run import run_folder

    runs: list[tuple[str, Path]] = []
    if cells is None:
        for cdir in sorted(p for p in (sdir / "cells").glob("*") if p.is_dir()):
            run = run_folder(cdir / "merged") if (cdir / "merged").is_dir() else run_folder(cdir)
            if run is not None:
                runs.append((cdir.name, run))
    else:
        runs = [(key, Path(run)) for key, run in cells.items() if run is not None]
    files = _own_files(sdir, ("leaderboard.md", "leaderboard.html"))
    return Group(kind="sweep", id=sdir.name, runs=runs, files=files, params={"sweep.cells": str(len(runs))})


def find_group(folder: Path) -> Group | None:
    """The group a folder holds (a comparison, a load test or a sweep), or None for anything else."""
    if (folder / "compare.md").is_file():
        return compare_group(folder)
    if (folder / "plan.json").is_file():
        return load_group(folder)
    if (folder / "cells").is_dir():
        return sweep_group(folder)
    return None


def group_record(g: Group) -> ExportRecord:
    return ExportRecord(
        key=f"{g.kind}:{g.id}",
        name=g.id,
        kind=g.kind,
        params={metric_key(k): v for k, v in g.params.items()},
        metrics=g.metrics,
        tags={"rig.group_id": g.id, "rig.kind": g.kind, "mlflow.source.name": "rig"},
        artifacts=g.files,
    )


# -- talking to MLflow ---------------------------------------------------------------------------------------------


@contextmanager
def _server_errors(uri: str, what: str) -> Iterator[None]:
    """Any failure of the client or the server as one MlflowExportError naming the server and how to finish."""
    try:
        yield
    except MlflowExportError:
        raise
    except offline.NetworkRefused as e:
        raise MlflowExportError(str(e)) from None
    except Exception as e:  # MLflow's and requests' exceptions, OSError: the client wraps them in many types
        reason = " ".join(str(e).split())[:400] or type(e).__name__
        raise MlflowExportError(
            f"MLflow at {uri}: {what} failed ({type(e).__name__}: {reason}). The run folder is unchanged; run the "
            "same export again once the server answers: it resumes where this one stopped."
        ) from None


class Exporter:
    """One tracking server and experiment; `send` makes (or finds) one MLflow run and brings it up to date."""

    def __init__(self, uri: str, experiment: str = DEFAULT_EXPERIMENT, allow: Iterable[str] = ()) -> None:
        offline.install(allow)
        offline.check_url(uri, "--mlflow")
        for k, v in HTTP_DEFAULTS.items():
            os.environ.setdefault(k, v)
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise MlflowExportError("--mlflow needs the mlflow package: pip install 'rig[mlflow]'") from None
        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        with _server_errors(uri, f"finding experiment {experiment!r}"):
            found = self.client.get_experiment_by_name(experiment)
            if found is None:
                try:
                    self.experiment_id = self.client.create_experiment(experiment)
                except Exception:  # created meanwhile by another export: take that one
                    found = self.client.get_experiment_by_name(experiment)
                    if found is None:
                        raise
                    self.experiment_id = found.experiment_id
            else:
                if found.lifecycle_stage == "deleted":
                    raise MlflowExportError(
                        f"MLflow at {uri}: experiment {experiment!r} is deleted; restore it or name another with "
                        "--mlflow-experiment"
                    )
                self.experiment_id = found.experiment_id

    def _find(self, rec: ExportRecord) -> Any:
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{EXPORT_KEY}` = '{export_key_value(rec.key)}'", max_results=2
        )
        if len(runs) > 1:
            raise MlflowExportError(
                f"MLflow at {self.uri}: two runs carry the export key of {rec.key} ({runs[0].info.run_id}, "
                f"{runs[1].info.run_id}); delete one and export again"
            )
        return runs[0] if runs else None

    def send(self, rec: ExportRecord, parent: str | None = None) -> ExportResult:
        """Create or find the MLflow run of ``rec`` and send what it lacks; the run ends FINISHED."""
        from mlflow.entities import Metric, Param, RunTag

        with _server_errors(self.uri, f"exporting {rec.key}"):
            run = self._find(rec)
            changed = run is None
            tags = {**rec.tags, EXPORT_KEY: export_key_value(rec.key), "mlflow.runName": rec.name}
            if parent is not None:
                tags["mlflow.parentRunId"] = parent
            if run is None:
                # the key tag goes in with the run, so an export stopped right after this call finds it again
                run = self.client.create_run(
                    self.experiment_id, run_name=rec.name, tags={EXPORT_KEY: tags[EXPORT_KEY], "rig.run_id": rec.key}
                )
            rid = run.info.run_id
            have = run.data
            for k, v in rec.params.items():
                if k in have.params and have.params[k] != v:
                    raise MlflowExportError(
                        f"MLflow at {self.uri}: run {rid} ({rec.key}) has param {k} = {have.params[k]!r}, the folder "
                        f"says {v!r}; MLflow params cannot change: delete that MLflow run (or use another "
                        "--mlflow-experiment) and export again"
                    )
            params = [Param(k, v) for k, v in rec.params.items() if k not in have.params]
            now = int(time.time() * 1000)
            metrics = [Metric(k, v, now, 0) for k, v in rec.metrics.items() if have.metrics.get(k) != v]
            for key, points in rec.steps.items():
                logged = {(m.step, m.value) for m in self.client.get_metric_history(rid, key)}
                metrics += [Metric(key, v, now, step) for step, v in points if (step, v) not in logged]
            stale = [k for k in have.tags if k.startswith(NOT_MEASURED) and k not in tags]
            for k in stale:
                self.client.delete_tag(rid, k)
            new_tags = [RunTag(k, v) for k, v in tags.items() if have.tags.get(k) != v]
            for chunk in _chunks(params, BATCH_PARAMS):
                self.client.log_batch(rid, params=chunk)
            for chunk in _chunks(metrics, BATCH_METRICS):
                self.client.log_batch(rid, metrics=chunk)
            for chunk in _chunks(new_tags, BATCH_TAGS):
                self.client.log_batch(rid, tags=chunk)
            sent = self._artifacts(rid, rec, have.tags)
            changed = changed or bool(params or metrics or new_tags or stale or sent)
            if changed or run.info.status != "FINISHED":
                self.client.set_terminated(rid, "FINISHED")
                changed = True
        return ExportResult(mlflow_run_id=rid, experiment_id=self.experiment_id, changed=changed)

    def _artifacts(self, rid: str, rec: ExportRecord, tags: dict[str, str]) -> int:
        """Upload each artifact whose sha256 the run does not record yet, then record it (so an upload cut short is
        redone); returns how many were sent."""
        sent = 0
        for path, local in rec.artifacts.items():
            digest = _sha256(local)
            tag = metric_key(ARTIFACT_SHA + path)
            if tags.get(tag) == digest:
                continue
            folder = posixpath.dirname(path) or None
            if local.name != posixpath.basename(path):  # MLflow names an artifact after its file
                with tempfile.TemporaryDirectory(prefix="rig-mlflow-") as tmp:
                    named = Path(tmp) / posixpath.basename(path)
                    named.write_bytes(local.read_bytes())
                    self.client.log_artifact(rid, str(named), folder)
            else:
                self.client.log_artifact(rid, str(local), folder)
            self.client.set_tag(rid, tag, digest)
            sent += 1
        return sent


def _chunks(items: list[Any], n: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- the library calls the CLI makes ---------------------------------------------------------------------------------


def export_run(
    run_dir: Path,
    uri: str,
    experiment: str = DEFAULT_EXPERIMENT,
    allow: Iterable[str] = (),
    exporter: Exporter | None = None,
) -> ExportResult:
    """One rig run as one MLflow run (found again by its run id on a later export)."""
    folder = RunFolder(run_dir)
    ex = exporter or Exporter(uri, experiment, allow)
    with tempfile.TemporaryDirectory(prefix="rig-mlflow-") as tmp:
        return ex.send(run_record(folder, Path(tmp)))


def export_group(
    group: Group,
    uri: str,
    experiment: str = DEFAULT_EXPERIMENT,
    allow: Iterable[str] = (),
    say: Callable[[str], object] = lambda _m: None,
) -> ExportResult:
    """A comparison, load test or sweep: a parent MLflow run with the group's own files, and a nested run per member
    (variant, level, cell), each found again by group and run id."""
    folders = [(label, RunFolder(path)) for label, path in group.runs]  # every member readable before anything is sent
    ex = Exporter(uri, experiment, allow)
    parent = ex.send(group_record(group))
    for label, folder in folders:
        with tempfile.TemporaryDirectory(prefix="rig-mlflow-") as tmp:
            rec = run_record(folder, Path(tmp), key=f"{group.kind}:{group.id}/{folder.manifest.run_id}", name=label)
            rec.tags["rig.group_id"] = group.id
            say(f"mlflow: {group.kind} {group.id}: {label}")
            parent.children.append(ex.send(rec, parent=parent.mlflow_run_id))
    return parent


def run_url(uri: str, result: ExportResult) -> str:
    """Where the MLflow UI shows the run (for an http(s) tracking URI), else the tracking URI and run id."""
    if uri.startswith(("http://", "https://")):
        return f"{uri.rstrip('/')}/#/experiments/{result.experiment_id}/runs/{result.mlflow_run_id}"
    return f"{uri} (run {result.mlflow_run_id})"
