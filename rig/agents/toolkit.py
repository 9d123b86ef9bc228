"""Toolkits: tools written as typed methods, their JSON schemas derived from the signatures.

A tool is a method marked with ``@tool``. What the model sees comes from the method itself:

- the description is the docstring's first paragraph, its ``{kit.x}`` fields read from the ``kit`` object given to
  ``tool_specs`` (a toolkit instance by default), so a description can follow a dataset's settings;
- each parameter's schema comes from its annotation (``type``; ``enum`` from a ``Literal``; ``items`` from
  ``list[X]`` or ``Sequence[X]``; ``anyOf`` from a union), its default (``default``; a parameter defaulting to
  ``None`` is optional and has none; a tuple is written as an array) and its line in the docstring's ``Args:``
  section (``description``);
- ``@tool(name=..., param=dict(...))`` adds what a signature cannot say: bounds, lengths, nested object shapes.

Key order is kept exactly, because the schema is printed into prompts: ``type``, the annotation's key, the decorator's
keys as written, ``default``, ``description``. A decorator key whose value is ``...`` marks where a derived key goes
instead, and a callable value is called with ``kit`` (an enum that depends on the instance).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from rig.records import ToolSpec

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__rig_tool__"
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def tool(name: str | None = None, /, **params: dict[str, Any]) -> Callable[[F], F]:
    """Mark a method as a tool named ``name`` (default: the method's name); ``params`` add schema keys per
    parameter."""

    def mark(fn: F) -> F:
        unknown = set(params) - set(inspect.signature(fn).parameters)
        if unknown:
            raise TypeError(f"@tool on {fn.__name__}: no parameter(s) {sorted(unknown)}")
        setattr(fn, _MARK, (name or fn.__name__, params))
        return fn

    return mark


class Toolkit:
    """A set of tools: subclasses write each tool as a ``@tool`` method (declaration order is offering order)."""

    @classmethod
    def tool_methods(cls) -> dict[str, Callable[..., Any]]:
        """Tool name -> unbound method, in declaration order (base classes first)."""
        out: dict[str, Callable[..., Any]] = {}
        for klass in reversed(cls.__mro__):
            for fn in vars(klass).values():
                if hasattr(fn, _MARK):
                    name = getattr(fn, _MARK)[0]
                    if name in out and out[name].__name__ != fn.__name__:  # overriding a method is fine
                        raise TypeError(f"{cls.__name__}: tool {name!r} is declared twice")
                    out[name] = fn
        return out

    @classmethod
    def tool_specs(cls, kit: Any = None) -> list[ToolSpec]:
        return [spec_of(fn, kit) for fn in cls.tool_methods().values()]

    def specs(self) -> list[ToolSpec]:
        return self.tool_specs(self)

    def names(self) -> list[str]:
        return list(self.tool_methods())

    def method(self, name: str) -> Callable[..., Any] | None:
        """The bound method that answers ``name``, or None for a name this toolkit does not offer."""
        fn = self.tool_methods().get(name)
        return None if fn is None else getattr(self, fn.__name__)


def spec_of(fn: Callable[..., Any], kit: Any = None) -> ToolSpec:
    """The ToolSpec of one ``@tool`` method (see the module docstring for the rules)."""
    name, extras = getattr(fn, _MARK)
    summary, arg_docs = _docstring(fn)
    hints = get_type_hints(fn)
    props: dict[str, Any] = {}
    required: list[str] = []
    for p in list(inspect.signature(fn).parameters.values())[1:]:  # skip self
        derived: dict[str, Any] = _type_schema(hints[p.name])
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        elif p.default is not None:
            derived["default"] = list(p.default) if isinstance(p.default, tuple) else p.default
        if p.name in arg_docs:
            derived["description"] = arg_docs[p.name].format(kit=kit)
        props[p.name] = _merge(derived, extras.get(p.name, {}), kit)
    parameters = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    return ToolSpec(name=name, description=summary.format(kit=kit), parameters=parameters)


def _merge(derived: dict[str, Any], extra: dict[str, Any], kit: Any) -> dict[str, Any]:
    late = ("default", "description")
    out = {k: v for k, v in derived.items() if k not in extra and k not in late}
    for k, v in extra.items():
        if v is ...:
            out[k] = derived[k]
        else:
            out[k] = v(kit) if callable(v) else v
    out.update({k: derived[k] for k in late if k in derived and k not in extra})
    return out


def _type_schema(t: Any) -> dict[str, Any]:
    origin, args = get_origin(t), get_args(t)
    if origin is Literal:
        return {"type": _JSON_TYPES[type(args[0])], "enum": list(args)}
    if origin in (Union, types.UnionType):
        alts = [a for a in args if a is not type(None)]
        if len(alts) == 1:  # X | None: the None only makes the argument optional
            return _type_schema(alts[0])
        return {"anyOf": [_type_schema(a) for a in alts]}
    if origin in (list, Sequence):
        return {"type": "array", "items": _type_schema(args[0])} if args else {"type": "array"}
    if origin is dict:
        return {"type": "object"}
    if t in _JSON_TYPES:
        return {"type": _JSON_TYPES[t]}
    raise TypeError(f"no JSON-schema type for annotation {t!r}")


def _docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """First paragraph (lines joined by spaces) and the ``Args:`` section's ``name: text`` entries."""
    doc = inspect.getdoc(fn) or ""
    head, _, args = doc.partition("\nArgs:\n")
    summary = " ".join(line.strip() for line in head.strip().split("\n\n")[0].splitlines())
    entries: dict[str, str] = {}
    current = ""
    for line in args.splitlines():
        stripped = line.strip()
        if not stripped:
            break
        key, sep, text = stripped.partition(": ")
        if sep and line.startswith("    ") and not line.startswith("     ") and key.isidentifier():
            current = key
            entries[key] = text
        elif current:
            entries[current] += " " + stripped
    return summary, entries
