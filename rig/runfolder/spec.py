"""`RunSpec`: the settings of one run, declared once, with their bounds on the type.

Every setting is one field here: `RunSettings` holds those a run's results depend on (which `RunConfig` records
resolved and hashes), `RunSpec` adds what to run and how. A field's `Setting` says how it takes part beyond the spec
(its flag, `--resume`, the run hash and a sweep cell's key), so no command keeps a list of the settings of its own.
The CLI flags of `rig bench`, `rig compare`, `rig load` and `rig sweep` become a spec through `make_spec`; `rig
compare`, `rig load` and `rig sweep` hand each cell its spec as a `spec.json` file (`rig bench --spec FILE`), never
as a re-serialised argv, so option values (lists, null, mappings) reach the cell as the same JSON values.
`BenchOptions` (rig.execution.bench) is a RunSpec plus where the run folder goes (`out`, `resume`).

Bounds are checked when a spec is built, from flags, a file or the library API alike; conflicts between settings
that only a benchmark knows of (CallNavi's answer format against `--decode`) are refused when the benchmark is built
from the spec (`Benchmark.conflicts`), before the model loads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from typing_extensions import Self

from rig.records import DecodeMode, MaxTokens, Seed, ToolMode, write_atomic

Order = Literal["grouped", "shuffled"]

DECODES: tuple[str, ...] = get_args(DecodeMode)
TOOL_MODES: tuple[str, ...] = get_args(ToolMode)
ORDERS: tuple[str, ...] = get_args(Order)

# Upper bounds, so a typo cannot ask for a plan of a billion items (the plan is a list in memory): 10,000 repeats of
# even one episode is days of model time, and no engine rig drives batches beyond 1,024 requests in flight.
MAX_REPEATS = 10_000
MAX_CONCURRENCY = 1024

# The seed of a run whose command was given no --seed, the same for `rig bench`, compare's variants, load's levels and
# a sweep's cells, so each samples the same --limit questions and their episodes pair up. Recorded in the run's spec;
# it overrides the models.yaml entry's seed, as --seed does.
DEFAULT_SEED = 0

_SHARD = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True)
class Setting:
    """How a field of a run's settings takes part beyond the spec, declared on the field itself
    (``Annotated[type, Setting(...)]``) so that a new setting is one field, not an edit in every command."""

    flag: str | None = None  # its CLI flag, when not --<name-with-dashes>
    # Added after run hashes and sweep cell keys existed: it enters them only when it is not at its default, so the
    # runs and sweeps made before it still resume and find their cells. Every setting added from now on sets it.
    when_set: bool = False
    per_job: bool = False  # set for each job of a sweep cell (its shard, its GPU), not by the sweep file
    resumed: bool = True  # False: the invocation's (which models file, how many in flight), never taken by --resume


def setting(field: FieldInfo) -> Setting:
    return next((m for m in field.metadata if isinstance(m, Setting)), Setting())


def flag(name: str, cls: type[BaseModel] | None = None) -> str:
    """The CLI flag of a field of ``cls`` (a RunSpec by default): the words error messages use for it."""
    field = (cls or RunSpec).model_fields.get(name)
    if field is None:
        return name
    return setting(field).flag or "--" + name.replace("_", "-")


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N) as (I, N); the one reader of a shard, for the spec's check and for the runs that use it."""
    m = _SHARD.fullmatch(text.strip())
    if not m or not int(m[1]) < int(m[2]):
        raise ValueError(f"{text!r}: expected I/N with 0 <= I < N, e.g. 0/2")
    return int(m[1]), int(m[2])


def _either(values: tuple[str, ...]) -> str:
    """``a, b or c``: a list of choices in help text."""
    return ", ".join(values[:-1]) + " or " + values[-1] if len(values) > 1 else "".join(values)


# The decode modes that are also tool modes: constrained output formats.
_CONSTRAINED = tuple(d for d in DECODES if d in TOOL_MODES)


def default_tool_mode(decode: str) -> str:
    """The one rule from decode to tool mode, for every command (RunSpec applies it when only decode is given):
    --decode json/yaml also constrains the tool calls of agentic benchmarks unless --tool-mode says otherwise
    (they have no other answer to constrain, and a flag that silently did nothing there would mislead)."""
    return decode if decode in _CONSTRAINED else "prompt"


class RunSettings(BaseModel):
    """The settings a run's results depend on, besides its model and its benchmarks. `RunSpec` asks for them (the
    sampling ones as overrides, None: the model's own); `RunConfig` records them as the run resolved them and hashes
    them, so ``--resume`` refuses a change. A field here is a setting of both."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Each field's description is its flag's help text (rig.cli.common.spec_option), so flag and spec say one thing.
    decode: DecodeMode = Field(default="none", description=f"Constrain output: {_either(DECODES)}.")
    tool_mode: ToolMode = Field(  # when not given: default_tool_mode(decode)
        default="prompt",
        description=f"How tools are offered: {_either(TOOL_MODES)} ({' and '.join(_CONSTRAINED)}: constrained "
        "calls); default: the --decode format, else prompt.",
    )
    temperature: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Override the model's temperature."
    )
    seed: Seed | None = Field(default=None, description="Override the model's seed.")
    max_tokens: MaxTokens | None = Field(default=None, description="Override the model's max_tokens.")
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS, description="Runs per episode (stability scores need k > 1).")
    limit: int | None = Field(default=None, ge=1, description="Run a seeded sample of N questions.")
    shard: Annotated[str | None, Setting(when_set=True, per_job=True)] = Field(  # "i/N" (0-based)
        default=None,
        description="I/N: run only shard I (0-based) of N of the selected questions (rig sweep; join shards with "
        "rig merge).",
    )
    gpu: Annotated[int | None, Setting(per_job=True)] = Field(
        default=None,
        ge=0,
        description="GPU to use: a position in CUDA_VISIBLE_DEVICES (every engine rig starts alike; a server rig "
        "attaches to, or Ollama, chooses its own, which the run reports); CPU when omitted.",
    )

    @field_validator("shard")
    @classmethod
    def _shard(cls, v: str | None) -> str | None:
        if v is None:
            return v
        i, n = parse_shard(v)
        return f"{i}/{n}"


class RunSpec(RunSettings):
    """What to run: one model on one benchmark (or every benchmark with data), under one decode and tool mode.

    ``options`` are benchmark options as JSON values: ``bench.key`` reaches that benchmark, a bare ``key`` needs
    ``benchmark``. The sampling fields override the model's own (``None``: the models.yaml entry's value).
    ``gpu`` is a position in ``CUDA_VISIBLE_DEVICES`` (or the physical index when it is unset), the same for every
    engine and for the memory sampler.
    """

    # model None: only with --resume (taken from the run's record)
    model: str | None = Field(default=None, description="Model from models.yaml (see `rig models`).")
    benchmark: str | None = Field(
        default=None, description="Benchmark to run (default: every benchmark with data available)."
    )
    data: Path | None = Field(default=None, description="Benchmark data folder (default: the embedded sample).")
    options: Annotated[dict[str, Any], Setting(flag="--option")] = Field(
        default_factory=dict,
        description="Benchmark option key=value (e.g. task=routing); `rig benchmarks` lists each benchmark's options.",
    )
    order: Annotated[Order, Setting(when_set=True)] = Field(
        default="grouped", description="grouped (shared prompt prefixes together) or shuffled."
    )
    concurrency: Annotated[int, Setting(when_set=True, resumed=False)] = Field(
        default=1, ge=1, le=MAX_CONCURRENCY, description="Episodes in flight."
    )
    models_file: Annotated[Path | None, Setting(flag="--models", resumed=False)] = Field(
        default=None, description="models.yaml to use."
    )
    # What the reports show, not what the results depend on: not a RunSettings field, so not in the run hash.
    pass_k: Annotated[list[int] | None, Setting(when_set=True)] = Field(
        default=None,
        description="k of pass^k and pass@k, comma-separated, each from 1 to --repeats (default: 1, 3, 5 and n, "
        "those up to n = --repeats).",
    )

    @field_validator("pass_k", mode="before")
    @classmethod
    def _comma_ks(cls, v: Any) -> Any:
        if isinstance(v, str):
            parts = [p.strip() for p in v.split(",")]
            if not all(p.lstrip("-").isdigit() for p in parts):
                raise ValueError(f"{v!r}: expected whole numbers separated by commas, e.g. 1,3,5")
            return [int(p) for p in parts]
        return v

    @model_validator(mode="after")
    def _ks_within_repeats(self) -> RunSpec:
        if self.pass_k is not None and self._repeats_known():
            why = pass_k_error(self.pass_k, self.repeats)
            if why:
                raise ValueError(why)
        return self

    def _repeats_known(self) -> bool:
        """Whether ``repeats`` is the run's (a resumed run takes its own from the record, checked then)."""
        return True

    @model_validator(mode="before")
    @classmethod
    def _tool_mode_follows_decode(cls, data: Any) -> Any:
        # Only when decode is given: a resumed run's unset fields come from its record, tool mode included.
        if isinstance(data, dict) and data.get("tool_mode") is None and data.get("decode") is not None:
            data = {**data, "tool_mode": default_tool_mode(str(data["decode"]))}
        elif isinstance(data, dict) and "tool_mode" in data and data["tool_mode"] is None:
            data = {k: v for k, v in data.items() if k != "tool_mode"}
        return data

    def seeded(self) -> Self:
        """This spec, with `DEFAULT_SEED` recorded when no seed was given: what every command runs a new run with."""
        return self if self.seed is not None else self.model_copy(update={"seed": DEFAULT_SEED})

    def spec_fields(self) -> dict[str, Any]:
        """The RunSpec part of this object (a BenchOptions also says where the run goes), as JSON values, with only
        the fields that were set: what a cell's spec.json holds."""
        names = set(RunSpec.model_fields) & self.model_fields_set
        return self.model_dump(mode="json", include=names)


def pass_k_error(ks: list[int], repeats: int) -> str | None:
    """Why ``--pass-k`` cannot be measured over ``repeats`` trials of each episode, naming the flag; None when it
    can."""
    if not ks:
        return "--pass-k: give at least one k"
    bad = [k for k in ks if not 1 <= k <= repeats]
    if bad:
        return f"--pass-k {','.join(map(str, ks))}: k = {bad[0]} is outside 1 to --repeats {repeats}"
    return None


def pass_ks(ks: list[int] | None, repeats: int) -> list[int]:
    """The k to report: those asked for, else 1, 3, 5 and n up to n = ``repeats``."""
    if ks:
        return sorted(set(ks))
    return sorted({k for k in (1, 3, 5) if k <= repeats} | {repeats})


# The CLI flag each field is given by, for error messages in the user's words.
FLAGS = {name: flag(name) for name in RunSpec.model_fields}


def axes() -> tuple[str, ...]:
    """The settings a comparison or a sweep varies: those of a run's settings whose type is a choice (decode, tool
    mode). `rig compare` takes them as a variant's ``@key=value`` and as lists, a sweep file as lists."""
    return tuple(n for n, f in RunSettings.model_fields.items() if get_origin(f.annotation) is Literal)


S = TypeVar("S", bound=RunSpec)


def make_spec(fields: dict[str, Any], cls: type[S], where: str = "", strict: bool = False) -> S:
    """The one way a command's parsed parameters (flags, a spec file, a sweep cell) become its spec: validated, a
    bad value a SpecError naming the flag, or the file (``where``) and the field. ``strict``: JSON values read from
    a file, taken as JSON types (no bool for an int, no string for a number)."""
    try:
        if strict:
            return cls.model_validate_json(json.dumps(fields), strict=True)
        return cls.model_validate(fields)
    except ValidationError as e:
        raise spec_error(e, where, cls) from None


class SpecError(ValueError):
    """A run spec that does not validate; str() is one line per problem naming the field (and the file)."""


def spec_error(exc: ValidationError, where: str = "", cls: type[BaseModel] | None = None) -> SpecError:
    """A RunSpec's validation errors in the user's words: ``--gpu: -1: must be 0 or more``-like lines, prefixed by
    the file they came from when there is one."""
    lines = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        field = loc[0] if loc else ""
        name = (f"{where}: {'.'.join(loc)}" if where else flag(field, cls)) or "spec"
        msg = err["msg"].removeprefix("Value error, ")
        if not loc and msg.startswith("--"):  # a check across settings names its flags itself
            lines.append(f"{where}: {msg}" if where else msg)
        elif err["type"] == "extra_forbidden":
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
    # strict, as every file rig reads (rig.inputs): `limit: true` is not 1, `"3"` not a number
    return make_spec(raw, cls, str(path), strict=True)


MAX_SPEC_BYTES = 1 << 20


def write_spec(path: Path, spec: RunSpec) -> Path:
    """The spec.json a cell process reads back with ``rig bench --spec``: only the fields that were set, so unset
    sampling overrides stay the model's own."""
    write_atomic(path, json.dumps(spec.spec_fields(), indent=2, ensure_ascii=False))
    return path
