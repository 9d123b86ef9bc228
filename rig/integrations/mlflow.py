"""rig results on an MLflow tracking server: one MLflow run per rig run, a parent run with nested ones for a
comparison, a load test or a sweep.

What a run gives MLflow (`ExportRecord`) is computed from its folder alone in `rig.integrations.mlflow_record`; a
comparison, load test or sweep (`Group`) is read in `rig.integrations.mlflow_groups`. This module sends them.

Idempotent: the MLflow run is found by a tag (``rig.export_key``: the run id, or group and run id for a nested one)
before one is created, and only what differs is sent (params present with the same value, metrics whose latest value
is the same, artifacts whose recorded sha256 matches are skipped), so exporting twice changes nothing and an
interrupted export (server down, an HTTP error, a signal) completes on the next try. The run folder is only read.

The tracking URI passes the offline guard first (`rig.offline.check_url`): loopback, ``file:`` or a lab host allowed
with ``--allow-host HOST:PORT`` / ``RIG_ALLOW_HOSTS``; anything else is refused before any connection.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rig import offline
from rig.integrations.mlflow_groups import Group, compare_group, find_group, group_record, load_group, sweep_group
from rig.integrations.mlflow_record import (
    MAX_KEY,
    MAX_PARAM_VALUE,
    NOT_MEASURED,
    ExportRecord,
    MlflowExportError,
    metric_key,
    run_record,
)
from rig.runfolder.folder import RunFolder

__all__ = [  # the CLI's and the tests' names, wherever they are defined
    "MAX_KEY",
    "MAX_PARAM_VALUE",
    "NOT_MEASURED",
    "ExportRecord",
    "ExportResult",
    "Exporter",
    "Group",
    "MlflowExportError",
    "compare_group",
    "export_group",
    "export_run",
    "find_group",
    "load_group",
    "metric_key",
    "run_record",
    "run_url",
    "sweep_group",
]

DEFAULT_EXPERIMENT = "rig"
EXPORT_KEY = "rig.export_key"  # the tag an export finds its MLflow run by
ARTIFACT_SHA = "rig.artifact_sha256."  # + artifact path: the sha256 of what was uploaded there
# MLflow's limits on entities per log_batch call
BATCH_METRICS, BATCH_PARAMS, BATCH_TAGS = 1000, 100, 100
# A down server should fail in seconds, not after MLflow's default seven retries with exponential backoff; a lab
# that wants more sets these variables itself.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    # seconds a request may wait for the server's next byte (MLflow's own default is 120, three tries: six minutes
    # of a silent server holding the command)
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}
# MLflow's variables that name a server besides --mlflow: each must pass what the flag passes.
TRACKING_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")


class ExportResult(BaseModel):
    mlflow_run_id: str
    experiment_id: str
    changed: bool  # False: the server already held everything (a repeated export)
    children: list[ExportResult] = Field(default_factory=list)


def export_key_value(key: str) -> str:
    """The ``rig.export_key`` tag value: a hash, so any run id or label is safe inside a search filter."""
    return hashlib.sha256(key.encode()).hexdigest()[:40]


# -- talking to MLflow ---------------------------------------------------------------------------------------------


@contextmanager
def _server_errors(uri: str, what: str) -> Iterator[None]:
    """Any failure of the client or the server as one MlflowExportError naming the server (``uri`` as given; its
    password is shown as ***, also where the client's own message quotes it) and how to finish."""
    try:
        yield
    except MlflowExportError:
        raise
    except offline.NetworkRefused as e:
        raise MlflowExportError(str(e)) from None
    except Exception as e:  # MLflow's and requests' exceptions, OSError: the client wraps them in many types
        reason = offline.redact_in(" ".join(str(e).split()), uri)[:400] or type(e).__name__
        hint = "run the same export again once the server answers: it resumes where this one stopped"
        if offline.parse_uri(uri).scheme == "file":  # MLflow 3 refuses a file store unless told otherwise
            hint = "if MLflow refuses a file store, give sqlite:///PATH/mlflow.db (a local database) instead"
        raise MlflowExportError(
            f"MLflow at {offline.redact(uri)}: {what} failed ({type(e).__name__}: {reason}). The run folder is "
            f"unchanged; {hint}."
        ) from None


class Exporter:
    """One tracking server and experiment; `send` makes (or finds) one MLflow run and brings it up to date."""

    def __init__(self, uri: str, experiment: str = DEFAULT_EXPERIMENT, allow: Iterable[str] = ()) -> None:
        try:
            offline.install(allow)
            check_tracking(uri)
        except (offline.AllowListError, offline.NetworkRefused) as e:
            raise MlflowExportError(str(e)) from None
        for k, v in HTTP_DEFAULTS.items():
            os.environ.setdefault(k, v)
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise MlflowExportError("--mlflow needs the mlflow package: pip install 'rig[mlflow]'") from None
        self.given = uri
        self.uri = offline.redact(uri)  # what messages show: never the password
        with _server_errors(uri, f"finding experiment {experiment!r}"):
            self.client = MlflowClient(tracking_uri=uri)
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
                        f"MLflow at {self.uri}: experiment {experiment!r} is deleted; restore it or name another with "
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

        with _server_errors(self.given, f"exporting {rec.key}"):
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
    with tempfile.TemporaryDirectory(prefix="rig-mlflow-") as tmp:
        rec = run_record(folder, Path(tmp))  # a refusal (a link in the folder) before the server is touched
        ex = exporter or Exporter(uri, experiment, allow)
        return ex.send(rec)


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
    with tempfile.TemporaryDirectory(prefix="rig-mlflow-") as tmp:
        records = []  # every member's files checked (a link is refused) before anything is sent
        for i, (label, folder) in enumerate(folders):
            key = f"{group.kind}:{group.id}/{folder.manifest.run_id}"
            rec = run_record(folder, Path(tmp) / str(i), key=key, name=label)
            rec.tags["rig.group_id"] = group.id
            records.append((label, rec))
        ex = Exporter(uri, experiment, allow)
        parent = ex.send(group_record(group))
        for label, rec in records:
            say(f"mlflow: {group.kind} {group.id}: {label}")
            parent.children.append(ex.send(rec, parent=parent.mlflow_run_id))
    return parent


def check_tracking(uri: str) -> None:
    """The tracking URI through the offline guard (`offline.check_url`: BadUri, NetworkRefused), and MLflow's own
    tracking variables, which its client may read besides the URI it is given, checked the same way."""
    offline.check_url(uri, "--mlflow")
    for var in TRACKING_ENV:
        if var in os.environ:
            offline.check_url(os.environ[var], var)


def run_url(uri: str, result: ExportResult) -> str:
    """Where the MLflow UI shows the run (for an http(s) tracking URI), else the tracking URI and run id; a password
    in the URI is shown as ***."""
    uri = offline.redact(uri)
    if uri.startswith(("http://", "https://")):
        return f"{uri.rstrip('/')}/#/experiments/{result.experiment_id}/runs/{result.mlflow_run_id}"
    return f"{uri} (run {result.mlflow_run_id})"
