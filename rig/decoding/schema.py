"""Reduce a JSON schema node to the few shapes the grammar builders know.

Grammars may under-approximate a schema (fixed key order, closed objects) but must never accept a value
that fails validation, so keywords that restrict values in ways a grammar cannot express are refused in
strict mode instead of silently ignored. ``oneOf`` is the one exception: it is treated as ``anyOf`` (the
grammar cannot prove alternatives disjoint), which is exact whenever alternatives are closed objects with
distinct required keys, enums of distinct values, or different types.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from rig.decoding.validate import json_equal, resolve_ref, validate


class SchemaError(ValueError):
    """The schema is malformed or no value can satisfy it."""


class UnsupportedSchema(NotImplementedError):
    """The schema uses a keyword the grammar generators cannot enforce."""


# Keywords that only annotate. ``format`` is an annotation by default in draft 2020-12 and in validate().
_ANNOTATIONS = {
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "$defs",
    "definitions",
    "format",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "nullable",
    "discriminator",
    "example",
}
# Assertions on values a grammar cannot express (validate() checks them after decoding): refused in strict mode;
# the json / yaml tool modes drop them from the call envelope and leave them to the tool executor.
UNENFORCEABLE = {
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
}
_UNSUPPORTED = UNENFORCEABLE | {
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "if",
    "then",
    "else",
    "not",
    "contains",
    "minContains",
    "maxContains",
    "prefixItems",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
}


@dataclass(frozen=True)
class AnyValue:
    pass


@dataclass(frozen=True)
class Prim:
    type: str  # string | number | integer | boolean | null
    min_len: int = 0  # strings only, in code points
    max_len: int | None = None
    pattern: str | None = None  # strings only: an anchored pattern of plain ASCII (``plain_pattern``)


@dataclass(frozen=True)
class Enum:
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Prop:
    name: str
    schema: Any
    required: bool


@dataclass(frozen=True)
class Obj:
    props: tuple[Prop, ...]  # non-empty: closed object with these keys in this order
    extra: Any = True  # when props is empty: schema of every value (False: only {})
    max_entries: int | None = None  # when props is empty: maxProperties, which a grammar can count there


@dataclass(frozen=True)
class Arr:
    items: Any
    min: int
    max: int | None


@dataclass(frozen=True)
class Union_:
    options: tuple[Any, ...]


Shape = AnyValue | Prim | Enum | Obj | Arr | Union_


def key(schema: Any) -> str:
    """Canonical text of a sub-schema, used to share grammar rules between identical sub-schemas."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


class Normalizer:
    def __init__(self, root: Any, *, strict: bool = True) -> None:
        if not isinstance(root, (dict, bool)):
            raise SchemaError(f"a JSON schema is an object or a boolean, got {type(root).__name__}")
        self.root = root
        self.strict = strict

    def shape(self, s: Any, path: str = "$") -> Shape:
        if s is True:
            return AnyValue()
        if s is False:
            raise SchemaError(f"{path}: schema `false` admits no value")
        if not isinstance(s, dict):
            raise SchemaError(f"{path}: schema must be an object or boolean, got {s!r}")
        s = self._flatten(s, path)
        if self.strict:
            enforced = ({"maxProperties"} if _free_keys(s) else set()) | ({"pattern"} if _plain_string(s) else set())
            bad = sorted(set(s) & _UNSUPPORTED - enforced)
            if bad:
                raise UnsupportedSchema(
                    f"{path}: JSON-schema keyword(s) {bad} cannot be enforced by a grammar; pass strict=False to "
                    "ignore them (the output is still checked by validate() after decoding)"
                )
        if "anyOf" in s or "oneOf" in s:
            return self._union(s, path)
        if "enum" in s or "const" in s:
            return self._enum(s, path)
        types = s.get("type")
        if isinstance(types, list):
            if not types:
                raise SchemaError(f"{path}: empty type list")
            return Union_(tuple({**s, "type": t} for t in dict.fromkeys(types)))
        if types is None:
            if {"properties", "required", "additionalProperties"} & s.keys():
                types = "object"
            elif {"items", "minItems", "maxItems"} & s.keys():
                types = "array"
            else:
                return AnyValue()
        if types == "object":
            return self._object(s, path)
        if types == "array":
            return self._array(s, path)
        if types == "string":
            lo, hi = int(s.get("minLength", 0)), s.get("maxLength")
            if hi is not None and int(hi) < lo:
                raise SchemaError(f"{path}: maxLength {hi} < minLength {lo}")
            if _plain_string(s):  # the pattern is the string's whole language, its length bound included
                return Prim("string", pattern=s["pattern"])
            return Prim("string", lo, None if hi is None else int(hi))
        if types in ("number", "integer", "boolean", "null"):
            return Prim(types)
        raise SchemaError(f"{path}: unknown type {types!r}")

    def _flatten(self, s: dict, path: str) -> dict:
        """Inline $ref and allOf so the rest only sees plain keywords."""
        for _ in range(64):  # a $ref chain longer than this is a cycle with no structure in between
            if "$ref" in s:
                try:
                    target = resolve_ref(s["$ref"], self.root)
                except ValueError as e:
                    raise SchemaError(f"{path}: {e}") from None
                if target is False:
                    raise SchemaError(f"{path}: $ref {s['$ref']!r} is `false`")
                rest = {k: v for k, v in s.items() if k != "$ref"}
                s = _merge(target if isinstance(target, dict) else {}, rest, path, self.strict)
            elif "allOf" in s:
                rest = {k: v for k, v in s.items() if k != "allOf"}
                for sub in s["allOf"]:
                    if sub is False:
                        raise SchemaError(f"{path}: allOf contains `false`")
                    rest = _merge(rest, sub if isinstance(sub, dict) else {}, path, self.strict)
                s = rest
            else:
                return s
        raise SchemaError(f"{path}: $ref/allOf nesting too deep (reference cycle?)")

    def _union(self, s: dict, path: str) -> Shape:
        if "anyOf" in s and "oneOf" in s and self.strict:
            raise UnsupportedSchema(f"{path}: anyOf together with oneOf is not supported")
        base = {k: v for k, v in s.items() if k not in ("anyOf", "oneOf")}
        options = []
        for sub in s["anyOf"] if "anyOf" in s else s["oneOf"]:
            if sub is False:
                continue
            merged = _merge(base, sub if isinstance(sub, dict) else {}, path, self.strict)
            if merged not in options:
                options.append(merged)
        if not options:
            raise SchemaError(f"{path}: no satisfiable anyOf/oneOf alternative")
        return Union_(tuple(options))

    def _enum(self, s: dict, path: str) -> Shape:
        values = list(s["enum"]) if "enum" in s else [s["const"]]
        if "const" in s:
            values = [v for v in values if json_equal(v, s["const"])]
        rest = {k: v for k, v in s.items() if k not in ("enum", "const")}
        kept: list[Any] = []
        for v in values:  # an enum value must still satisfy the sibling keywords (e.g. "type")
            if not validate(v, rest, root=self.root) and not any(json_equal(v, k) for k in kept):
                kept.append(v)
        if not kept:
            raise SchemaError(f"{path}: no enum/const value satisfies the rest of the schema")
        return Enum(tuple(kept))

    def _object(self, s: dict, path: str) -> Obj:
        props = s.get("properties", {})
        required = list(s.get("required", []))
        extra = s.get("additionalProperties", True)
        out: list[Prop] = []
        for name, sub in props.items():
            if sub is False:
                if name in required:
                    raise SchemaError(f"{path}: required key {name!r} has schema `false`")
                continue
            out.append(Prop(name, sub, name in required))
        for name in required:
            if name not in props:
                if extra is False:
                    raise SchemaError(f"{path}: required key {name!r} is not allowed (additionalProperties false)")
                out.append(Prop(name, extra if isinstance(extra, dict) else True, True))
        if out:
            return Obj(tuple(out), False)
        hi = s.get("maxProperties")
        if hi is not None and (not isinstance(hi, int) or isinstance(hi, bool) or hi < 0):
            raise SchemaError(f"{path}: maxProperties {hi!r} is not a non-negative integer")
        return Obj((), extra, hi)

    def _array(self, s: dict, path: str) -> Arr:
        items = s.get("items", True)
        if isinstance(items, list):
            if self.strict:
                raise UnsupportedSchema(f"{path}: tuple-form 'items' (a list) is not supported")
            items = True
        lo, hi = int(s.get("minItems", 0)), s.get("maxItems")
        if items is False:
            hi = 0
        if hi is not None and int(hi) < lo:
            raise SchemaError(
                f"{path}: maxItems {hi} < minItems {lo}"
                if items is not False
                else f"{path}: items is `false` but minItems is {lo}"
            )
        return Arr(items, lo, None if hi is None else int(hi))


_PLAIN = re.compile(
    r"\^(?:[A-Za-z0-9_-]|\[(?:[A-Za-z0-9_]|[0-9]-[0-9]|[A-Z]-[A-Z]|[a-z]-[a-z])+\]|[()|?*+]|\{\d+(?:,\d*)?\})+\$"
)


def plain_pattern(pattern: Any) -> bool:
    """A ``pattern`` a grammar writes exactly: anchored at both ends (a JSON-schema pattern is a search, so anything
    else admits text around it), built of ASCII letters, digits, ``_`` and ``-``, classes of those (ranges within one
    kind: ``a-z``, ``A-Z``, ``0-9``), groups, ``|`` and quantifiers; so no string it admits needs an escape in JSON or
    YAML (identifiers: ``^[A-Za-z_][A-Za-z0-9_]{0,63}$``)."""
    return isinstance(pattern, str) and _PLAIN.fullmatch(pattern) is not None


def _plain_string(s: dict) -> bool:
    """A string schema whose ``pattern`` the grammar enforces (with no length bound beside it: the pattern has one)."""
    return plain_pattern(s.get("pattern")) and not {"minLength", "maxLength"} & s.keys()


def _free_keys(s: dict) -> bool:
    """An object schema whose keys are free (no properties or required keys): there a grammar counts its entries,
    so maxProperties is enforced rather than refused."""
    return not s.get("properties") and not s.get("required") and s.get("type", "object") == "object"


def _merge(a: dict, b: dict, path: str, strict: bool) -> dict:
    """Conjunction of two schemas as one dict; keys both define must agree (``required`` is unioned)."""
    out = dict(a)
    for k, v in b.items():
        if k == "required" and k in out:
            out[k] = list(dict.fromkeys([*out[k], *v]))
        elif k == "properties" and k in out:
            merged = dict(out[k])
            for name, sub in v.items():
                if name in merged and merged[name] != sub and strict:
                    raise UnsupportedSchema(f"{path}: conflicting schemas for property {name!r} in allOf/$ref")
                merged[name] = sub
            out[k] = merged
        elif k in out and out[k] != v and k not in _ANNOTATIONS and strict:
            raise UnsupportedSchema(f"{path}: conflicting values for {k!r} when combining schemas")
        else:
            out[k] = v
    return out
