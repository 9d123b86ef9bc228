"""The engine interface: one async ``chat`` for every backend.

An engine file holds only what is specific to its backend: a typed ``Args`` model for its models.yaml
``engine_args`` and ``generate``, one call to the backend. ``chat`` is ``generate`` followed by ``finalize``, the
post-processing every engine shares (thinking strip, tool calls and their JSON arguments, decode speed), so each
engine's replies are read back the same way.

The runner keeps up to N episodes in flight; an engine declares how much concurrency it can use.
Engines that cannot batch (in-process llama.cpp) serialise behind their own lock, so the runner
needs no special case.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from rig.decoding.constraint import Constraint
from rig.engines.textcalls import calls_from_text, parse_arguments
from rig.engines.thinking import allow_thinking_gbnf, strip_thinking
from rig.records import ChatRequest, Generation, Message, ParsedCall, ParseStatus, Sampling, Since, ToolSpec
from rig.registry import ModelSpec
from rig.telemetry.gpu import visible_devices

if TYPE_CHECKING:
    from rig.telemetry.energy import EnergyMeter


class Capabilities(BaseModel):
    native_tools: bool = False
    grammar_kinds: tuple[str, ...] = ()  # Constraint kinds served natively
    continuous_batching: bool = False
    max_concurrency: int = 1


class EngineError(RuntimeError):
    """A problem with the engine itself (load failure, server down), as opposed to a bad model output."""


class EngineArgs(BaseModel):
    """An engine's models.yaml ``engine_args``; each engine subclasses it as ``Args`` with its own fields."""

    model_config = ConfigDict(extra="forbid")


# A tool call as the backend returned it: (name, arguments as JSON text or as an object).
NativeCall = tuple[str, Any]


@dataclass
class Reply:
    """One backend call, before ``Engine.finalize``. A failed call is a reply whose generation has ``error`` set."""

    generation: Generation
    calls: list[NativeCall] = field(default_factory=list)  # tool calls from the backend's structured field
    decode_s: float | None = None  # seconds from the first to the last generated token


def openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tools as OpenAI-style function definitions: what chat templates, vLLM, OpenAI servers and Ollama take."""
    return [{"type": "function", "function": t.model_dump()} for t in tools]


def openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(exclude_none=True) for m in messages]


# A Sampling field an engine takes through code of its own (a conversion, a call apart), not sent under a name.
OWN_CODE = ""

# The Sampling fields of the first hash version, which every engine read before engines declared their fields: what
# an engine that declares none (a plugin written before) is taken to accept.
FIRST_SAMPLING = {n: n for n, f in Sampling.model_fields.items() if not any(isinstance(m, Since) for m in f.metadata)}


class Engine(abc.ABC):
    name: ClassVar[str] = "engine"
    Args: ClassVar[type[EngineArgs]] = EngineArgs
    # How each Sampling field reaches the backend: its name there (`sampling_args` sends it when set), or OWN_CODE.
    # A field missing here is one the backend cannot take: a model entry that sets it is refused, naming entry and
    # field. A new Sampling field is one line here in each engine that takes it.
    SAMPLING: ClassVar[dict[str, str]] = FIRST_SAMPLING

    def __init__(self, spec: ModelSpec, weights: str, *, gpu: int | None = None) -> None:
        self.spec = spec
        self.weights = weights
        self.gpu = gpu
        self.args = validate_engine_args(self.Args, spec, self.name)
        self.check_sampling(spec)
        # again here, not only in `check`: the divergence pass and `rig load` make engines without rig bench's check
        self.check_args(self.args, spec)
        self.counters: dict[str, int] = {"tool_calls_from_text": 0}
        self.meter: EnergyMeter | None = None  # set by the run: reads the energy counter around each call

    @classmethod
    def check(cls, spec: ModelSpec) -> None:
        """Everything about a models.yaml entry this engine refuses without loading anything (its sampling fields,
        its engine_args): an EngineError naming entry and field, before a run folder is made."""
        cls.check_sampling(spec)
        cls.check_args(validate_engine_args(cls.Args, spec, cls.name), spec)

    @classmethod
    def check_args(cls, args: Any, spec: ModelSpec) -> None:
        """An engine's own checks of its validated ``engine_args`` (vLLM: the grammar backend's package)."""
        return None

    @classmethod
    def check_sampling(cls, spec: ModelSpec) -> None:
        """An EngineError naming the models.yaml entry and the field when the entry's sampling sets a field this
        engine's backend does not take (before a run starts, so it is never silently left out)."""
        s = spec.sampling
        unsupported = [
            name
            for name, f in Sampling.model_fields.items()
            if name not in cls.SAMPLING and getattr(s, name) != f.get_default(call_default_factory=True)
        ]
        if unsupported:
            fields = ", ".join(f"sampling.{n}" for n in unsupported)
            raise EngineError(
                f"models.yaml entry {spec.name!r}: {fields} is not supported by engine {cls.name!r} "
                f"(it takes: {', '.join(cls.SAMPLING)}); remove it from the entry or use another engine"
            )

    def sampling_args(self, s: Sampling) -> dict[str, Any]:
        """The request's sampling under the backend's names (`SAMPLING`): each field it takes by name, when set (an
        unset field, None or no stop strings, is left to the engine's own neutral value)."""
        out = {}
        for name, api in self.SAMPLING.items():
            value = getattr(s, name)
            if api != OWN_CODE and value is not None and value != []:
                out[api] = value
        return out

    @property
    @abc.abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abc.abstractmethod
    async def load(self) -> None: ...

    async def chat(self, request: ChatRequest) -> Generation:
        if self.meter is None:
            return self.finalize(await self.generate(request), request)
        span = self.meter.begin()
        gen = None
        try:
            gen = self.finalize(await self.generate(request), request)
            return gen
        finally:
            self.meter.end(span, gen)

    async def generate(self, request: ChatRequest) -> Reply:
        """The backend call. Raise (EngineError) only for a request the engine cannot serve at all, before any
        work; anything that fails during the call is recorded in the reply's ``error``."""
        raise NotImplementedError(f"{type(self).__name__} implements neither generate nor chat")

    async def close(self) -> None:
        return None

    def device_count(self) -> int:
        """How many devices from ``--gpu``'s position the model spans (vLLM's tensor parallelism)."""
        return 1

    def device_env(self) -> dict[str, str]:
        """The environment that puts a backend the engine starts (a library that reads it at import, a server
        process) on the devices ``--gpu`` names: CUDA_VISIBLE_DEVICES narrowed to ``device_count`` entries from
        that position, not replaced by the number itself; {} on a CPU run."""
        if self.gpu is None:
            return {}
        try:
            return {"CUDA_VISIBLE_DEVICES": ",".join(visible_devices(self.gpu, self.device_count()))}
        except ValueError as e:
            raise EngineError(str(e)) from None

    def device_placement(self) -> str | None:
        """None when this engine puts the model on the device ``--gpu`` names, which telemetry watches; otherwise
        why it cannot, recorded with the run's GPU readings and printed, since they may then be another device's.
        An engine that places the model itself says so by overriding this."""
        return f"engine {self.name!r} does not declare that it places the model on the device --gpu names"

    def describe(self) -> dict[str, Any]:
        """What the engine found out at load (detected features, counters) for the run manifest."""
        return {}

    def versions(self) -> dict[str, str]:
        """Library versions that belong in the run manifest."""
        return {}

    def count_tokens(self, text: str) -> int | None:
        return None

    # -- what engines share ----------------------------------------------------------------------------------------

    @property
    def template_kwargs(self) -> dict[str, Any]:
        """Chat-template switches from models.yaml (``thinking: off`` asks the template not to think)."""
        return {"enable_thinking": False} if self.spec.thinking == "off" else {}

    def gbnf(self, c: Constraint) -> str:
        """rig's GBNF for a constraint; with ``thinking: strip`` it admits one think block before the answer."""
        from rig.decoding import to_gbnf

        gbnf = to_gbnf(c)
        return allow_thinking_gbnf(gbnf) if self.spec.thinking == "strip" else gbnf

    def parse_native_calls(self, text: str, request: ChatRequest) -> list[NativeCall]:
        """Tool calls the backend's own parser finds in the (thinking-stripped) text, for backends that return
        calls as text rather than in ``Reply.calls``."""
        return []

    def finalize(self, reply: Reply, request: ChatRequest) -> Generation:
        """The post-processing every engine's reply goes through, once, in ``chat``."""
        gen = reply.generation
        if self.spec.thinking == "strip":
            gen.text = strip_thinking(gen.text)
        n = gen.completion_tokens
        if gen.timings.decode_tps is None and reply.decode_s and reply.decode_s > 0 and n and n > 1:
            gen.timings.decode_tps = (n - 1) / reply.decode_s  # tokens after the first, over their span
        if gen.error is None and request.tool_mode == "native" and request.tools:
            try:
                calls = reply.calls or self.parse_native_calls(gen.text, request)
            except Exception as e:  # a failed call is a recorded error, not a crashed run
                gen.error = f"{type(e).__name__}: {e}"
                return gen
            self._read_calls(gen, calls)
        return gen

    def _read_calls(self, gen: Generation, calls: list[NativeCall]) -> None:
        """The backend's calls with JSON arguments; with none, the calls the model left in the text."""
        status: ParseStatus = "no_call"
        for name, arguments in calls:
            args = parse_arguments(arguments or {})  # a call without arguments has empty ones
            if args is None:
                status = "parse_error"
                continue
            gen.tool_calls.append(ParsedCall(name=name, arguments=args))
            status = "ok" if status != "parse_error" else status
            gen.call_form = "native"
        if not calls:
            found = calls_from_text(gen.text)
            if found is not None:  # the backend did not parse the call; the model still made one
                gen.tool_calls, status, gen.call_form = found
                self.counters["tool_calls_from_text"] += 1
        gen.parse_status = status


def validate_engine_args(model: type[EngineArgs], spec: ModelSpec, engine: str) -> EngineArgs:
    """``spec.engine_args`` read by ``model``; EngineError naming the models.yaml entry and the fields."""
    where = f"models.yaml entry {spec.name!r}"
    try:
        return model.model_validate(spec.engine_args)
    except ValidationError as e:
        errors = e.errors()
    unknown = sorted(str(err["loc"][0]) for err in errors if err["type"] == "extra_forbidden")
    if unknown:
        raise EngineError(
            f"{where}: engine_args {unknown} not understood by {engine} (allowed: {sorted(model.model_fields)})"
        ) from None
    raise EngineError(f"{where}: " + "; ".join(_arg_error(model, err) for err in errors)) from None


def _arg_error(model: type[EngineArgs], err: Any) -> str:
    if not err["loc"]:  # a check across fields (model validator)
        return str(err.get("ctx", {}).get("error", err["msg"]))
    key = str(err["loc"][0])
    if err["type"] == "literal_error":
        annotation = model.model_fields[key].annotation
        literal = next((a for a in get_args(annotation) if get_args(a)), annotation)  # Literal[...] | None
        choices = get_args(literal)
        return f"engine_args.{key} {err['input']!r} is not one of {', '.join(map(str, choices))}"
    if err["type"] == "value_error":  # a field validator's own words
        return f"engine_args.{key}: {err['ctx']['error']}"
    return f"engine_args.{key} {err['input']!r}: {err['msg']}"
