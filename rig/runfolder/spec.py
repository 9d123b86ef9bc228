"""`RunSpec`: the settings of one run, declared once, with their bounds on the type.

The CLI flags of `rig bench`, `rig compare` and `rig sweep` are validated into it; `rig compare` and `rig sweep`
hand each cell its spec as a `spec.json` file (`rig bench --spec FILE`), never as a re-serialised argv, so option
values (lists, null, mappings) reach the cell as the same JSON values. `BenchOptions` (rig.execution.bench) is a RunSpec
plus where the run folder goes (`out`, `resume`).

Bounds are checked when a spec is built, from flags, a file or the library API alike; conflicts between settings
that only a benchmark knows of (CallNavi's answer format against `--decode`) are refused when the benchmark is built
from the spec (`Benchmark.conflicts`), before the model loads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rig.records import DecodeMode, MaxTokens, ToolMode, write_atomic

Order = Literal["grouped", "shuffled"]

DECODES: tuple[str, ...] = get_args(DecodeMode)
TOOL_MODES: tuple[str, ...] = get_args(ToolMode)
ORDERS: tuple[str, ...] = get_args(Order)

# Upper bounds, so a typo cannot ask for a plan of a billion items (the plan is a list in memory): 10,000 repeats of
# even one episode is days of model time, and no engine rig drives batches beyond 1,024 requests in flight.
MAX_REPEATS = 10_000
MAX_CONCURRENCY = 1024

_SHARD = re.compile(r"(\d+)/(\d+)")

# The CLI flag each field is given by, for error messages in the user's words.
FLAGS = {
    "model": "--model",
    "benchmark": "--benchmark",
    "data": "--data",
    "options": "--option",
    "decode": "--decode",
    "tool_mode": "--tool-mode",
    "temperature": "--temperature",
    "seed": "--seed",
    "max_tokens": "--max-tokens",
    "repeats": "--repeats",
    "limit": "--limit",
    "shard": "--shard",
    "gpu": "--gpu",
    "order": "--order",
    "concurrency": "--concurrency",
    "models_file": "--models",
    "out": "--out",
    "resume": "--resume",
}


def _either(values: tuple[str, ...]) -> str:
    """``a, b or c``: a list of choices in help text."""
    return ", ".join(values[:-1]) + " or " + values[-1] if len(values) > 1 else "".join(values)


# The decode modes that are also tool modes: constrained output formats.
_CONSTRAINED = tuple(d for d in DECODES if d in TOOL_MODES)


def default_tool_mode(decode: str) -> str:
    """--decode json/yaml also constrains the tool calls of agentic benchmarks unless --tool-mode says otherwise
    (they have no other answer to constrain, and a flag that silently did nothing there would mislead)."""
    return decode if decode in _CONSTRAINED else "prompt"


class RunSpec(BaseModel):
    """What to run: one model on one benchmark (or every benchmark with data), under one decode and tool mode.

    ``options`` are benchmark options as JSON values: ``bench.key`` reaches that benchmark, a bare ``key`` needs
    ``benchmark``. The sampling fields override the model's own (``None``: the models.yaml entry's value).
    ``gpu`` is a position in ``CUDA_VISIBLE_DEVICES`` (or the physical index when it is unset), the same for every
    engine and for the memory sampler.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Each field's description is its flag's help text (rig.cli.common.spec_option), so flag and spec say one thing.
    # model None: only with --resume (taken from the run's record)
    model: str | None = Field(default=None, description="Model from models.yaml (see `rig models`).")
    benchmark: str | None = Field(
        default=None, description="Benchmark to run (default: every benchmark with data available)."
    )
    data: Path | None = Field(default=None, description="Benchmark data folder (default: the embedded sample).")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Benchmark option key=value (e.g. task=routing); `rig benchmarks` lists each benchmark's options.",
    )
    decode: DecodeMode = Field(default="none", description=f"Constrain output: {_either(DECODES)}.")
    tool_mode: ToolMode = Field(  # when not given: default_tool_mode(decode)
        default="prompt",
        description=f"How tools are offered: {_either(TOOL_MODES)} ({' and '.join(_CONSTRAINED)}: constrained "
        "calls); default: the --decode format, else prompt.",
    )
    temperature: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Override the model's temperature."
    )
    seed: int | None = Field(default=None, description="Override the model's seed.")
    max_tokens: MaxTokens | None = Field(default=None, description="Override the model's max_tokens.")
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS, description="Runs per episode (stability scores need k > 1).")
    limit: int | None = Field(default=None, ge=1, description="Run a seeded sample of N questions.")
    shard: str | None = Field(  # "i/N" (0-based)
        default=None,
        description="I/N: run only shard I (0-based) of N of the selected questions (rig sweep; join shards with "
        "rig merge).",
    )
    gpu: int | None = Field(
        default=None,
        ge=0,
        description="GPU to use: a position in CUDA_VISIBLE_DEVICES (every engine alike); CPU when omitted.",
    )
    order: Order = Field(default="grouped", description="grouped (shared prompt prefixes together) or shuffled.")
    concurrency: int = Field(default=1, ge=1, le=MAX_CONCURRENCY, description="Episodes in flight.")
    models_file: Path | None = Field(default=None, description="models.yaml to use.")

    @model_validator(mode="before")
    @classmethod
    def _tool_mode_follows_decode(cls, data: Any) -> Any:
        # Only when decode is given: a resumed run's unset fields come from its record, tool mode included.
        if isinstance(data, dict) and data.get("tool_mode") is None and data.get("decode") is not None:
            data = {**data, "tool_mode": default_tool_mode(str(data["decode"]))}
        elif isinstance(data, dict) and "tool_mode" in data and data["tool_mode"] is None:
            data = {k: v for k, v in data.items() if k != "tool_mode"}
        return data

    @field_validator("shard")
    @classmethod
    def _shard(cls, v: str | None) -> str | None:
        if v is None:
            return v
        m = _SHARD.fullmatch(v.strip())
        if not m or not int(m[1]) < int(m[2]):
            raise ValueError(f"{v!r}: expected I/N with 0 <= I < N, e.g. 0/2")
        return f"{int(m[1])}/{int(m[2])}"

    def spec_fields(self) -> dict[str, Any]:
        """The RunSpec part of this object (a BenchOptions also says where the run goes), as JSON values, with only
        the fields that were set: what a cell's spec.json holds."""
        names = set(RunSpec.model_fields) & self.model_fields_set
        return self.model_dump(mode="json", include=names)


class SpecError(ValueError):
    """A run spec that does not validate; str() is one line per problem naming the field (and the file)."""


def spec_error(exc: ValidationError, where: str = "") -> SpecError:
    """A RunSpec's validation errors in the user's words: ``--gpu: -1: must be 0 or more``-like lines, prefixed by
    the file they came from when there is one."""
    lines = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        field = loc[0] if loc else ""
        name = (f"{where}: {'.'.join(loc)}" if where else FLAGS.get(field, field)) or "spec"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            lines.append(f"{name}: unknown setting")
        elif err["type"] != "value_error" and not isinstance(err.get("input"), dict):
            lines.append(f"{name}{':' if where else ''} {err.get('input')!r}: {msg}")
        else:  # a validator's own message already quotes the value
            lines.append(f"{name}: {msg}")
    return SpecError("\n".join(lines))


def read_spec(path: Path, cls: type[RunSpec] = RunSpec) -> RunSpec:
    """A spec.json file; a missing, unreadable or invalid file is a SpecError naming the file and the field."""
    from rig.inputs import InputError, read_json

    try:
        # a FIFO or /dev/zero is refused, not waited on; NaN passes, so that validation names the field
        raw = read_json(Path(path), max_bytes=MAX_SPEC_BYTES, finite=False)
    except InputError as e:
        raise SpecError(str(e)) from None
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: expected a JSON object of run settings")
    try:
        # strict, as every file rig reads (rig.inputs): `limit: true` is not 1, `"3"` not a number
        return cls.model_validate_json(json.dumps(raw), strict=True)
    except ValidationError as e:
        raise spec_error(e, str(path)) from None


MAX_SPEC_BYTES = 1 << 20


def write_spec(path: Path, spec: RunSpec) -> Path:
    """The spec.json a cell process reads back with ``rig bench --spec``: only the fields that were set, so unset
    sampling overrides stay the model's own."""
    write_atomic(path, json.dumps(spec.spec_fields(), indent=2, ensure_ascii=False))
    return path
