"""The sweep file: a typed matrix of cells, validated before anything runs.

A cell is one `rig bench` run (one model, one benchmark with its options, one decode and tool mode). Its folder is
named from a hash of everything that defines it, so re-running the same sweep finds its cells again.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from rig.inputs import InputError, read_yaml
from rig.runfolder.spec import DEFAULT_SEED, RunSpec, axes, make_spec, setting

M = TypeVar("M", bound=BaseModel)


class SweepError(Exception):
    """Bad sweep input; str() names the file and field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Resources(Strict):
    """What one cell (one shard of it) asks of the machine or the Ray cluster."""

    num_gpus: float = Field(default=0, ge=0)  # a tensor-parallel vLLM entry asks for several
    num_cpus: float = Field(default=1, gt=0)
    memory_gb: float | None = Field(default=None, gt=0)


class BenchmarkEntry(Strict):
    name: str
    options: dict[str, Any] = Field(default_factory=dict)  # the benchmark's -O options
    data: Path | None = None


class SweepSpec(Strict):
    """The sweep's own keys. The run settings a sweep file gives (decode, repeats, ...) are RunSpec's, read by
    `sweep_settings`."""

    models: list[str] = Field(min_length=1)  # models.yaml entries, variants included ("name@label")
    benchmarks: list[BenchmarkEntry] = Field(min_length=1)
    shards: int = Field(1, ge=1)
    resources: Resources = Field(default_factory=lambda: Resources())
    max_retries: int = Field(2, ge=0)  # re-runs of a cell whose process died, each resuming from its store
    baseline: str | None = None  # the model whose cells the leaderboard pairs others against (default: the first)

    @field_validator("benchmarks", mode="before")
    @classmethod
    def _bare_names(cls, v: Any) -> Any:
        return [{"name": b} if isinstance(b, str) else b for b in v] if isinstance(v, list) else v


def _from_entries() -> set[str]:
    """The settings a cell takes from its `models:` and `benchmarks:` entries: the model, and the benchmark with the
    entry's other keys (options, data)."""
    return {"model", "benchmark"} | set(BenchmarkEntry.model_fields) - {"name"}


# The leaderboard pairs cells by episode: one seed for every cell unless the file gives one, as in compare and load.
_SWEEP_DEFAULTS = {"seed": DEFAULT_SEED}


@functools.cache
def sweep_settings() -> type[BaseModel]:
    """The run settings a sweep file may give, derived from RunSpec's fields: a choice (decode, tool mode) is an
    axis, a list of values each cell takes one of (None: the spec's default, tool mode following decode); any other
    setting is one value for every cell. A job's own settings (shard, GPU) are the sweep's to give."""
    fields: dict[str, Any] = {}
    for name, f in RunSpec.model_fields.items():
        if name in _from_entries() or setting(f).per_job:
            continue
        if name in axes():
            fields[name] = (list[f.annotation] | None, Field(default=None, min_length=1))  # type: ignore[name-defined]
        else:
            fields[name] = (f.annotation, f)
    model: type[BaseModel] = create_model("SweepSettings", __base__=Strict, **fields)
    return model


class Cell(RunSpec):
    """One run of the matrix: the RunSpec of every shard of it (each job adds `shard` and `gpu`); `key` names its
    folder."""

    model: str  # a cell always names both
    benchmark: str

    def _keyed(self) -> dict[str, Any]:
        """What names a cell: its settings but a job's own, a setting added after cell keys existed only when it is
        not at its default (`Setting.when_set`), so the sweeps of earlier rigs find their cells again."""
        keyed = {}
        for name, f in RunSpec.model_fields.items():
            value = getattr(self, name)
            role = setting(f)
            if not role.per_job and not (role.when_set and value == f.get_default(call_default_factory=True)):
                keyed[name] = value
        return keyed

    @property
    def key(self) -> str:
        blob = json.dumps(self.model_dump(mode="json", include=set(self._keyed())), sort_keys=True)
        name = f"{self.model}-{self.benchmark}-{self.decode}-{self.tool_mode}".replace("/", "_").replace("@", "_")
        return f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"

    def spec(self, shard: str | None = None, gpu: int | None = None) -> RunSpec:
        """The cell's run (one shard of it), as the spec.json its `rig bench` process reads."""
        fields = {**self._keyed(), "shard": shard, "gpu": gpu}
        return RunSpec.model_validate({k: v for k, v in fields.items() if v is not None})


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


# A sweep file is short; the bounded loader keeps an alias bomb or deep nesting from hanging the command, and NaN
# passes it so that validation names the field.
MAX_SPEC_BYTES = 1 << 20
MAX_SPEC_VALUES = 200_000


def load_sweep(path: Path) -> tuple[SweepSpec, list[Cell]]:
    """Read and check a sweep file: keys, models, benchmarks and their options; errors name the file and field."""
    try:
        raw = read_yaml(path, max_bytes=MAX_SPEC_BYTES, max_nodes=MAX_SPEC_VALUES, finite=False)
    except InputError as e:
        raise SweepError(str(e)) from None
    if not isinstance(raw, dict):
        raise SweepError(f"{path}: expected a mapping with models: and benchmarks:")
    own = {k: v for k, v in raw.items() if k not in sweep_settings().model_fields}
    spec = _validate(path, SweepSpec, own)
    given = _validate(path, sweep_settings(), {k: v for k, v in raw.items() if k not in own}).model_dump(
        exclude_unset=True
    )
    base = path.resolve().parent
    if given.get("models_file") is not None:
        given["models_file"] = base / given["models_file"]
    _check(path, spec, given, base)
    return spec, _cells(path, spec, given, base)


def _validate(path: Path, model: type[M], raw: dict[str, Any]) -> M:
    try:
        # strict, as every file rig reads (rig.inputs): `limit: true` is not 1; through JSON, where a path or a
        # literal is still read from its string
        return model.model_validate_json(json.dumps(raw), strict=True)
    except ValidationError as e:
        lines = [f"{path}: {_where(err['loc'])}: {err['msg']}" for err in e.errors()]
        raise SweepError("\n".join(lines)) from None


def _cells(path: Path, spec: SweepSpec, given: dict[str, Any], base: Path) -> list[Cell]:
    """The matrix: every model x benchmark x value of each axis, in the file's order; each cell through the spec's
    one helper, so the decode -> tool mode rule is the one every command applies."""
    shared = {k: v for k, v in given.items() if k not in axes()} | {
        k: v for k, v in _SWEEP_DEFAULTS.items() if k not in given
    }
    lists = [[(name, v) for v in given.get(name) or [None]] for name in axes()]
    cells = []
    for m, b, *values in itertools.product(spec.models, spec.benchmarks, *lists):
        entry = {"model": m, "benchmark": b.name, "options": b.options, "data": base / b.data if b.data else None}
        fields = {k: v for k, v in {**shared, **entry, **dict(values)}.items() if v is not None}
        cells.append(make_spec(fields, Cell, str(path)))
    return cells


def _check(path: Path, spec: SweepSpec, given: dict[str, Any], base: Path) -> None:
    from rig.benchmarks import benchmark_names, get_benchmark_class
    from rig.benchmarks.base import DataError
    from rig.registry import RegistryError, load_registry

    try:
        reg = load_registry(given.get("models_file"))
    except RegistryError as e:
        raise SweepError(f"{path}: models_file: {e}") from None
    resolved: dict[str, int] = {}
    for i, m in enumerate(spec.models):
        try:
            name = reg.get(m).name
        except RegistryError as e:
            raise SweepError(f"{path}: models[{i}]: {e}") from None
        if name in resolved:  # two cells of one model would run twice, racing on one cell folder
            j = resolved[name]
            what = "listed" if spec.models[j] == m else f"the model {name!r}, listed as {spec.models[j]!r}"
            raise SweepError(f"{path}: models[{i}]: {m!r} is {what} already at models[{j}]; list each model once")
        resolved[name] = i
    for field in axes():
        values: list[Any] = given.get(field) or []
        for i, v in enumerate(values):
            if values.index(v) != i:
                raise SweepError(f"{path}: {field}[{i}]: {v!r} is already listed as {field}[{values.index(v)}]")
    seen: dict[str, int] = {}
    for i, b in enumerate(spec.benchmarks):
        ident = json.dumps(b.model_dump(mode="json"), sort_keys=True)
        if ident in seen:
            raise SweepError(
                f"{path}: benchmarks[{i}]: the same as benchmarks[{seen[ident]}] (name, options and data); list it once"
            )
        seen[ident] = i
    if spec.baseline is not None and spec.baseline not in spec.models:
        raise SweepError(f"{path}: baseline: {spec.baseline!r} is not one of models: {', '.join(spec.models)}")
    for i, b in enumerate(spec.benchmarks):
        if b.name not in benchmark_names():
            raise SweepError(
                f"{path}: benchmarks[{i}].name: unknown benchmark {b.name!r}; available: {', '.join(benchmark_names())}"
            )
        try:
            get_benchmark_class(b.name).parse_options(b.options)
        except DataError as e:
            raise SweepError(f"{path}: benchmarks[{i}].options: {e}") from None
        if b.data is not None and not (base / b.data).exists():
            raise SweepError(f"{path}: benchmarks[{i}].data: {base / b.data} not found")
