"""A scripted agent behind the engine interface: a benchmark's gold (or anti-gold) trajectory played through the same
``Engine.chat``, tool-mode parsers, agent loops and scorers as a model's replies, never around them.

A ``Player`` looks at each request (the conversation so far, the offered tools, the constraint) and says what the
agent does next: a ``Call`` of a tool or an ``Answer``. ``ScriptedEngine`` writes that action the way the request
asks for it: a native tool call in native mode, a JSON call in prompt mode, and under a constraint the text the
constraint's grammar must accept (keys in the schema's declared order, YAML in the grammar's layout). Every
constrained reply is checked before it is returned, with a JSON-schema validator and with each grammar engine
installed (`rig.decoding.accept`); a reply a constraint excludes is returned as an engine error naming the
constraint, so the episode fails the way a model held to that grammar would have to, and the self-test can say
why."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from rig.decoding.accept import Acceptor
from rig.decoding.constraint import Constraint
from rig.decoding.schema import Arr, Normalizer, Obj, SchemaError, Union_
from rig.decoding.validate import validate
from rig.decoding.yaml_gbnf import yaml_dump
from rig.engines.base import Capabilities, Engine, Reply
from rig.records import ChatRequest, Generation, Timings
from rig.registry import EXTERNAL, ModelSpec, Weights


@dataclass(frozen=True)
class Call:
    """One tool call, with the thought a model writes beside it (text before the call; a constraint admits none)."""

    name: str
    arguments: dict[str, Any]
    thought: str = ""


@dataclass(frozen=True)
class Answer:
    """A reply that is not a tool call: a value written as JSON or YAML, or text as it is."""

    value: Any
    fmt: Literal["json", "yaml", "text"] = "json"


Action = Call | Answer
Player = Callable[[ChatRequest], Action]


def conform(value: Any, schema: Any, root: Any = None) -> Any:
    """``value`` with every object's keys in the order the schema declares them (a grammar writes properties in that
    order): in a union, the first alternative the value validates against; keys a schema does not declare last."""
    root = schema if root is None else root
    try:
        shape = Normalizer(root, strict=False).shape(schema)
    except SchemaError:
        return value
    if isinstance(shape, Union_):
        for option in shape.options:
            if not validate(value, option, root=root):
                return conform(value, option, root)
        return value
    if isinstance(shape, Obj) and isinstance(value, dict):
        if not shape.props:
            return {k: conform(v, shape.extra, root) if isinstance(shape.extra, dict) else v for k, v in value.items()}
        declared = {p.name: p.schema for p in shape.props}
        ordered = {p.name: conform(value[p.name], p.schema, root) for p in shape.props if p.name in value}
        return {**ordered, **{k: v for k, v in value.items() if k not in declared}}
    if isinstance(shape, Arr) and isinstance(value, list):
        return [conform(v, shape.items, root) for v in value]
    return value


def write(value: Any, constraint: Constraint | None, fmt: str = "json") -> str:
    """The text of an answer: in the constraint's format and key order when there is one, else in ``fmt``."""
    if constraint is not None and constraint.kind in ("json_schema", "yaml_schema"):
        value = conform(value, constraint.schema_)
        fmt = "yaml" if constraint.kind == "yaml_schema" else "json"
    elif constraint is not None or fmt == "text":
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return yaml_dump(value) if fmt == "yaml" else json.dumps(value, ensure_ascii=False)


@dataclass
class Rejection:
    """A reply the request's constraint does not admit: by which check, and the reply."""

    check: str
    why: str
    text: str


class ScriptedEngine(Engine):
    """An engine whose replies come from a ``Player`` (set with ``play``) instead of a model."""

    name = "scripted"

    def __init__(self, acceptors: list[Acceptor] | None = None) -> None:
        spec = ModelSpec(
            name="scripted", base="scripted", engine=EXTERNAL, weights=Weights(served="scripted"),
            quantization="none", context_length=1 << 20,
        )  # fmt: skip
        super().__init__(spec, "")
        self.acceptors = acceptors or []
        self.player: Player | None = None
        self.rejections: list[Rejection] = []
        self.requests = 0

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(native_tools=True, max_concurrency=1)

    async def load(self) -> None:
        return None

    def play(self, player: Player | None) -> None:
        """The agent of the next episode; its rejections start empty."""
        self.player, self.rejections, self.requests = player, [], 0

    async def generate(self, request: ChatRequest) -> Reply:
        if self.player is None:
            raise RuntimeError("ScriptedEngine: no player set")
        self.requests += 1
        action = self.player(request)
        gen = Generation(request_hash=request.digest(), text="", timings=Timings(e2e_s=0.0), finish_reason="stop")
        if isinstance(action, Call) and request.tool_mode == "native" and request.tools:
            gen.text = action.thought
            return Reply(gen, calls=[(action.name, json.dumps(action.arguments, ensure_ascii=False))])
        if isinstance(action, Call):
            gen.text = write({"name": action.name, "arguments": action.arguments}, request.constraint)
            if action.thought and request.constraint is None:
                gen.text = f"{action.thought}\n{gen.text}"
        else:
            gen.text = write(action.value, request.constraint, action.fmt)
        if request.constraint is not None:
            rejected = self._check(request.constraint, gen.text)
            if rejected:
                self.rejections += rejected
                why = "; ".join(f"{r.check}: {r.why}" for r in rejected)
                gen.error = f"constraint: the scripted reply is refused ({why})"
        gen.completion_tokens = max(1, len(gen.text.split()))
        return Reply(gen)

    def _check(self, constraint: Constraint, text: str) -> list[Rejection]:
        """Every check that refuses ``text`` under ``constraint`` (none: it is admitted)."""
        from rig.decoding.output import parse_output

        out = []
        if constraint.kind in ("json_schema", "yaml_schema"):
            _, err = parse_output(text.strip(), constraint)
            if err is not None:
                out.append(Rejection("schema", err.removeprefix("schema: "), text))
        elif constraint.kind == "choice" and text not in (constraint.choices or []):
            out.append(Rejection("choice", f"{text[:60]!r} is not one of the choices", text))
        for acc in self.acceptors:
            try:
                verdict = acc.accepts(constraint, text)
            except (ValueError, NotImplementedError) as e:
                out.append(Rejection(acc.name, f"grammar not usable: {e}", text))
                continue
            if verdict is False:
                out.append(Rejection(acc.name, "its grammar does not accept the text", text))
        return out
