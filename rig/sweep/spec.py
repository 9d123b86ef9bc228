"""The sweep file: a typed matrix of cells, validated before anything runs.

A cell is one `rig bench` run (one model, one benchmark with its options, one decode and tool mode). Its folder is
named from a hash of everything that defines it, so re-running the same sweep finds its cells again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rig.inputs import InputError, read_yaml
from rig.records import DecodeMode, MaxTokens, ToolMode
from rig.runfolder.spec import MAX_REPEATS, RunSpec


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
    models: list[str] = Field(min_length=1)  # models.yaml entries, variants included ("name@label")
    benchmarks: list[BenchmarkEntry] = Field(min_length=1)
    decode: list[DecodeMode] = Field(default_factory=lambda: list[DecodeMode](["none"]), min_length=1)
    tool_mode: list[ToolMode] = Field(default_factory=lambda: list[ToolMode](["prompt"]), min_length=1)
    repeats: int = Field(1, ge=1, le=MAX_REPEATS)
    limit: int | None = Field(None, ge=1)
    seed: int = 0
    max_tokens: MaxTokens | None = None
    temperature: float | None = Field(None, ge=0, allow_inf_nan=False)  # every cell would fail writing its manifest
    models_file: Path | None = None  # relative to the sweep file
    shards: int = Field(1, ge=1)
    resources: Resources = Field(default_factory=lambda: Resources())
    max_retries: int = Field(2, ge=0)  # re-runs of a cell whose process died, each resuming from its store
    baseline: str | None = None  # the model whose cells the leaderboard pairs others against (default: the first)

    @field_validator("benchmarks", mode="before")
    @classmethod
    def _bare_names(cls, v: Any) -> Any:
        return [{"name": b} if isinstance(b, str) else b for b in v] if isinstance(v, list) else v


# What names a cell's folder: these settings as JSON, hashed. The same fields and values as the rigs before Cell was a
# RunSpec, so their sweeps find their cells again.
CELL_KEY = (
    "model",
    "benchmark",
    "options",
    "data",
    "decode",
    "tool_mode",
    "repeats",
    "limit",
    "seed",
    "max_tokens",
    "temperature",
    "models_file",
)


class Cell(RunSpec):
    """One run of the matrix: the RunSpec of every shard of it (each job adds `shard` and `gpu`); `key` names its
    folder."""

    model: str  # a cell always names both
    benchmark: str

    @property
    def key(self) -> str:
        blob = json.dumps(self.model_dump(mode="json", include=set(CELL_KEY)), sort_keys=True)
        name = f"{self.model}-{self.benchmark}-{self.decode}-{self.tool_mode}".replace("/", "_").replace("@", "_")
        return f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"

    def spec(self, shard: str | None = None, gpu: int | None = None) -> RunSpec:
        """The cell's run (one shard of it), as the spec.json its `rig bench` process reads."""
        fields = {**self.model_dump(include=set(CELL_KEY)), "shard": shard, "gpu": gpu}
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
    try:
        # strict, as every file rig reads (rig.inputs): `limit: true` is not 1; through JSON, where a path or a
        # literal is still read from its string
        spec = SweepSpec.model_validate_json(json.dumps(raw), strict=True)
    except ValidationError as e:
        lines = [f"{path}: {_where(err['loc'])}: {err['msg']}" for err in e.errors()]
        raise SweepError("\n".join(lines)) from None
    base = path.resolve().parent
    models_file = (base / spec.models_file) if spec.models_file else None
    _check(path, spec, models_file, base)
    cells = [
        Cell(
            model=m,
            benchmark=b.name,
            options=b.options,
            data=base / b.data if b.data else None,
            decode=d,
            tool_mode=t,
            repeats=spec.repeats,
            limit=spec.limit,
            seed=spec.seed,
            max_tokens=spec.max_tokens,
            temperature=spec.temperature,
            models_file=models_file,
        )
        for m, b, d, t in itertools.product(spec.models, spec.benchmarks, spec.decode, spec.tool_mode)
    ]
    return spec, cells


def _check(path: Path, spec: SweepSpec, models_file: Path | None, base: Path) -> None:
    from rig.benchmarks import BENCHMARKS, get_benchmark_class
    from rig.benchmarks.base import DataError
    from rig.registry import RegistryError, load_registry

    try:
        reg = load_registry(models_file)
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
    for field in ("decode", "tool_mode"):
        values: list[str] = getattr(spec, field)
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
        if b.name not in BENCHMARKS:
            raise SweepError(
                f"{path}: benchmarks[{i}].name: unknown benchmark {b.name!r}; "
                f"available: {', '.join(sorted(BENCHMARKS))}"
            )
        try:
            get_benchmark_class(b.name).parse_options(b.options)
        except DataError as e:
            raise SweepError(f"{path}: benchmarks[{i}].options: {e}") from None
        if b.data is not None and not (base / b.data).exists():
            raise SweepError(f"{path}: benchmarks[{i}].data: {base / b.data} not found")
