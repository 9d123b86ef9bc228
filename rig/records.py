"""Typed records that flow through a run and are persisted in the store.

Everything a report shows is derived from these; nothing is recomputed from raw text later
except scores, which are kept beside the generations that produced them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from rig import inputs
from rig.decoding.constraint import Constraint
from rig.inputs import validation_where
from rig.names import path_name

Role = Literal["system", "user", "assistant", "tool"]
ParseStatus = Literal["ok", "parse_error", "no_call", "not_parsed"]
ToolMode = Literal["native", "prompt", "json", "yaml"]
# How a model wrote the tool call that was read (rig/engines/textcalls.py): the backend's structured field
# ("native"), <tool_call> tags, another tag (<tools>), a bare JSON reply, a code fence, JSON inside prose, or the YAML
# of the yaml tool mode.
CallForm = Literal["native", "tagged", "other_tag", "bare", "fenced", "prose", "yaml", "flat"]
CALL_FORMS: tuple[CallForm, ...] = get_args(CallForm)
DecodeMode = Literal["none", "json", "yaml"]


class Message(BaseModel):
    role: Role
    content: str
    name: str | None = None
    tool_call_id: str | None = None


class ToolSpec(BaseModel):
    """A tool offered to the model: OpenAI-style function description (rig.agents.toolkit derives it from a method)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


# A NaN or infinity cannot be written to JSON and read back: a run sampled with one had no readable manifest.
Finite = Annotated[float, Field(allow_inf_nan=False)]


# The one declaration of the max_tokens setting: a model's (models.yaml), a run's override (RunSpec) and a sweep's.
# Bounded: a reply past a million tokens is a typo (`1e12`), never a setting any engine serves.
MaxTokens = Annotated[int, Field(ge=1, le=1 << 20)]
DEFAULT_MAX_TOKENS = 512
# The one declaration of a seed (a model's, a run's override): what the engines' C calls take, a 64-bit integer
# signed or not; past it, llama-cpp-python's ctypes call fails at model load ("int too long to convert").
Seed = Annotated[int, Field(ge=-(1 << 63), le=(1 << 64) - 1)]

# The one declaration of the divergence pass's top-k (``DivergenceSettings.top_k``, the ``rig compare --top-k`` flag
# built from it), here so that the CLI reads it without loading the pass (numpy).
DivergenceTopK = Annotated[
    int,
    Field(
        ge=1,
        le=4096,
        description="Log-probabilities per reply position asked of a vLLM model by --divergence; only matters when a "
        "side is vLLM, whose KLD is then a lower bound (the top-k tokens plus one bucket for the rest; a larger k "
        "tightens it).",
    ),
]
DEFAULT_DIVERGENCE_TOP_K = 20


@dataclass(frozen=True)
class Since:
    """Marks a field of a hashed record (``Sampling``, ``Weights``, ...) added after hashes of that record existed:
    ``version`` is the hash version that brought it. It enters the config hash and the request hash only when set
    (not at its default, None), so every record made before it keeps its hash: an older run still resumes and its
    divergence replay still matches its stored request hashes. A field added to a hashed record from now on is
    ``Annotated[... | None, Since(HASH_VERSION + 1)] = None`` (and HASH_VERSION moves to that number)."""

    version: int


# The hash version of today's records: 1 is every field hashes held before `Since` existed.
HASH_VERSION = 2


def hash_view(record: BaseModel) -> Any:
    """``record`` as JSON values the way hashes read it: its dump, less each `Since` field left at its default, in
    nested records too."""
    data = record.model_dump(mode="json")
    _drop_unset_since(record, data)
    return data


def _drop_unset_since(record: BaseModel, data: dict[str, Any]) -> None:
    for name, f in type(record).model_fields.items():
        if name not in data:
            continue
        value = getattr(record, name)
        if any(isinstance(m, Since) for m in f.metadata) and value == f.get_default(call_default_factory=True):
            del data[name]
        elif isinstance(value, BaseModel) and isinstance(data[name], dict):
            _drop_unset_since(value, data[name])
        elif isinstance(value, list) and isinstance(data[name], list):
            for item, dumped in zip(value, data[name], strict=False):
                if isinstance(item, BaseModel) and isinstance(dumped, dict):
                    _drop_unset_since(item, dumped)


class Sampling(BaseModel):
    """How a reply is sampled. Each engine declares which fields its backend takes and under which name
    (`Engine.SAMPLING`); a field set for an engine that does not take it is refused, naming entry and field."""

    temperature: Finite = 0.0
    top_p: Finite = 1.0
    top_k: int | None = None
    max_tokens: MaxTokens = DEFAULT_MAX_TOKENS
    seed: Seed = 0
    stop: list[str] = Field(default_factory=list)
    # Unset (None): the engine's neutral value (llama.cpp's min_p 0, repeat penalty 1), not its library's default.
    min_p: Annotated[float | None, Since(2)] = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    repeat_penalty: Annotated[float | None, Since(2)] = Field(default=None, gt=0, allow_inf_nan=False)


class ChatRequest(BaseModel):
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_mode: ToolMode = "prompt"
    constraint: Constraint | None = None
    sampling: Sampling = Field(default_factory=Sampling)

    def digest(self) -> str:
        """Stable hash of the request, so identical prompts are recognisable across runs (`hash_view`: a field
        added later changes no earlier request's hash)."""
        blob = json.dumps(hash_view(self), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Timings(BaseModel):
    """Seconds unless named otherwise; None means not measured (never 0 as a stand-in)."""

    queue_s: float | None = None
    load_s: float | None = None  # model load inside this call (Ollama's load_duration; > 0 mid-run = a reload)
    prefill_s: float | None = None  # prompt processing, when the engine reports it
    ttft_s: float | None = None
    e2e_s: float | None = None
    decode_tps: float | None = None


Attribution = Literal["exclusive", "token-share", "time-share"]


class EnergyReading(BaseModel):
    """Energy the device drew for one generation or episode, net of the idle baseline measured before the model
    loaded. ``joules`` None means not measured and ``reason`` says why; it is never 0 as a stand-in.

    ``attribution`` says how a shared counter was split: ``exclusive`` (the only generation in flight),
    ``token-share`` (overlapping generations, each interval split by each one's share of the tokens it processed
    there) or ``time-share`` (the same split, evenly, when an engine reported no token counts)."""

    joules: float | None = None
    gross_j: float | None = None  # the counter's energy attributed to it, before the idle baseline is subtracted
    idle_j: float | None = None  # the idle baseline's energy over the same attributed time
    attribution: Attribution | None = None
    reason: str | None = None
    span: int | None = None  # the meter's span, kept so a copied generation is still matched to its reading


class ParsedCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Generation(BaseModel):
    """One engine call."""

    request_hash: str
    text: str = ""
    tool_calls: list[ParsedCall] = Field(default_factory=list)
    parse_status: ParseStatus = "not_parsed"
    call_form: CallForm | None = None  # None: no call was read, or stored before rig recorded the form
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    timings: Timings = Field(default_factory=Timings)
    error: str | None = None
    energy: EnergyReading | None = None  # None: stored before rig measured energy


class ToolResult(BaseModel):
    """What a tool answers: ``data`` when ``ok``, else an error and its category; never an exception.

    ``meta`` carries what a particular provider adds, e.g. the map service's ``source`` (hit / fuzzy from the replay
    store, pack, miss), the ``similarity`` or ``distance_m`` of a fallback answer, the validated ``arguments``."""

    ok: bool
    data: Any = None
    error: str | None = None
    error_category: str | None = None  # invalid_arguments, unknown_tool, not_found, no_route, replay_miss, ...
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def source(self) -> str | None:
        return self.meta.get("source")


class ToolCall(BaseModel):
    """A call the model made and what the sandbox answered (``meta``: the answer's ToolResult.meta ``source``)."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    verdict: Literal["valid", "invalid"] = "valid"
    answer: Any = None
    error: str | None = None
    error_category: str | None = None  # invalid_arguments, unknown_tool, not_found, no_route, replay_miss, ...
    step: int | None = None  # agent step (0-based) that made the call
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _legacy_source(cls, data: Any) -> Any:
        """Results stored before ``meta`` existed carry ``source`` as a field ("none" = no provider said)."""
        if isinstance(data, dict) and "source" in data:
            data = dict(data)
            source = data.pop("source")
            if source not in (None, "none"):
                data["meta"] = {"source": source, **(data.get("meta") or {})}
        return data


class Episode(BaseModel):
    benchmark: str
    id: str
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    ground_truth: Any = None
    tags: dict[str, str] = Field(default_factory=dict)
    # Episodes with the same prefix_group share a long prompt prefix; the runner keeps them together.
    prefix_group: str = ""


EpisodeStatus = Literal["scored", "failed"]


class EpisodeResult(BaseModel):
    benchmark: str
    episode_id: str
    repeat: int
    tags: dict[str, str] = Field(default_factory=dict)
    generations: list[Generation] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    output: Any = None
    scores: dict[str, float | None] = Field(default_factory=dict)
    status: EpisodeStatus = "scored"
    error_category: str | None = None
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    energy: EnergyReading | None = None  # the sum of its generations'; None: stored before rig measured energy
    seed: int | None = None  # this repeat's sampling seed (`repeat_seed`); None: stored before rig recorded it

    @field_validator("scores")
    @classmethod
    def _finite_scores(cls, v: dict[str, float | None]) -> dict[str, float | None]:
        """A NaN or infinite score is no score: what JSON stores for one (null), and what a results database that
        was edited or damaged to hold one reads as, so the report's means and intervals still compute."""
        return {k: x if x is None or math.isfinite(x) else None for k, x in v.items()}


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for the block to write; renamed over ``path`` only when the block ends without
    an error, so a reader, a process stopped mid-write (a signal) or a full disk never leaves a short file under the
    final name: the old file, if any, stays whole. The temporary name is unique to this process and call (two
    writers never share one) and ends in ``.tmp`` (left behind only by a process killed outright)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # the bytes reach the disk before the name does: a power cut keeps the old file
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        # Name the caller's file, not ours; a failed write (a full disk) names no file at all.
        if isinstance(e, OSError) and e.errno is not None and e.filename in (None, str(tmp)):
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through ``atomic_path``: the one way rig writes an output file."""
    with atomic_path(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)


class OutputError(ValueError):
    """An output folder that cannot be made; str() names the flag, the folder and why."""


def claim_folder(parent: Path, name: str, flag: str = "--out") -> Path:
    """A new folder ``parent/name`` that this call alone made: claimed with one mkdir, never checked then created,
    so two commands never share one; a name taken (two commands started in the same second) is followed by
    ``name-2``, ``name-3``. ``parent`` is created when missing; one that is a file or cannot be written is an
    OutputError naming ``flag``."""
    path_name(name, "folder name")
    parent = Path(parent)
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(f"{flag} {parent}: exists and is not a folder") from None
    except OSError as e:
        raise OutputError(f"{flag} {parent}: cannot create it ({e.strerror})") from None
    for i in range(1, 100):
        folder = parent / (name if i == 1 else f"{name}-{i}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
        except OSError as e:
            raise OutputError(f"{flag} {parent}: cannot create the folder {folder.name} ({e.strerror})") from None
    raise OutputError(f"{flag} {parent}: {name} and the 98 names after it are taken")


R = TypeVar("R", bound=BaseModel)


def read_record(path: Path, cls: type[R]) -> R:
    """A record another rig process wrote (a child's settings file), through the bounded reader: ValueError
    (``rig.inputs.InputError``) naming the file and the field."""
    return inputs.read_record(Path(path), cls)


def write_record(path: Path, record: BaseModel) -> None:
    """Write a record as indented JSON in one step (``write_atomic``), so a reader, or a process killed mid-write,
    never sees half a file. A record that would not read back (a NaN or infinity becomes null in JSON) is refused,
    ValueError naming the file and the field, and nothing is written."""
    text = record.model_dump_json(indent=2)
    try:
        type(record).model_validate_json(text)
    except ValueError as e:
        where = validation_where(e) if isinstance(e, ValidationError) and e.errors() else ""
        raise ValueError(f"{path}: not written, it would not read back ({where or e})") from None
    write_atomic(path, text)
