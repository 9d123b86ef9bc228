"""The one JSON-Schema validator (draft 2020-12 semantics for the keywords rig's schemas use), read two ways.

The rig does not depend on ``jsonschema``. ``issues`` walks a value against a schema and yields each failed check
as an ``Issue``, lazily, so a caller that stops at the first does no more work. ``validate`` words them all: a
model's answer is judged by the same rules whether or not an engine constrained it. The map service reads tool
arguments under stricter ``Rules`` and words the first issue its own way (``rig.maps.validate``).
``format`` is an annotation (as in jsonschema's default mode); unknown keywords are ignored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Issue:
    """One failed check, before it is worded."""

    path: str  # $-rooted: $.stops[0].lat
    keyword: str  # the schema keyword that failed; "false" (a false schema), "key" (a non-string key) or a Rules check
    found: Any  # the value, or what was counted: the keys missing or unexpected, the alternatives or items matched
    wanted: Any = None  # the schema's side: the types, enum, bound or pattern


@dataclass(frozen=True)
class Rules:
    """How strictly a value is read. The defaults are JSON Schema's; the map service reads tool arguments stricter.
    Rules apply where a schema is given: an absent ``items`` or ``additionalProperties`` checks nothing."""

    shallow_first: bool = False  # a node's key and item-count failures before its children's, properties in the
    # schema's order: what a caller that reports only the first issue should report
    null_is_absent: bool = False  # a null property is an omitted one: missing when required, never checked
    finite: bool = False  # numbers must be finite
    max_string: int | None = None  # a cap on every string, whatever maxLength says
    blank_is_short: bool = False  # minLength counts non-blank characters
    refuse: tuple[re.Pattern[str], ...] = ()  # strings any of these finds are refused


JSON_SCHEMA = Rules()


def validate(value: Any, schema: Any, *, root: Any = None) -> list[str]:
    """Error messages for ``value`` against ``schema`` (empty list = valid). Paths are ``$``-rooted."""
    return [message for issue in issues(value, schema, root=root) for message in words(issue)]


def issues(value: Any, schema: Any, rules: Rules = JSON_SCHEMA, *, root: Any = None) -> Iterator[Issue]:
    """The failed checks of ``value`` against ``schema``, in order; ``root`` resolves ``$ref`` (default: schema)."""
    return _check(value, schema, root if root is not None else schema, "$", rules)


def is_type(value: Any, t: str) -> bool:
    if t == "null":
        return value is None
    if t == "boolean":
        return isinstance(value, bool)
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "string":
        return isinstance(value, str)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if t == "number":
        return True
    if t == "integer":
        return isinstance(value, int) or (math.isfinite(value) and float(value).is_integer())
    raise ValueError(f"unknown JSON-schema type {t!r}")


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true != 1 (Python's == says otherwise)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def resolve_ref(ref: str, root: Any) -> Any:
    """Resolve a local JSON pointer (``#``, ``#/$defs/x``); remote references are not supported offline."""
    if not ref.startswith("#"):
        raise ValueError(f"only local $ref is supported, got {ref!r}")
    node = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ValueError(f"$ref {ref!r} does not resolve") from None
    return node


def _check(v: Any, s: Any, root: Any, path: str, rules: Rules) -> Iterator[Issue]:
    if s is True:
        return
    if s is False:
        yield Issue(path, "false", v)
        return
    if not isinstance(s, dict):
        raise TypeError(f"schema at {path} is not an object or boolean: {s!r}")
    if "$ref" in s:
        yield from _check(v, resolve_ref(s["$ref"], root), root, path, rules)
    types = s.get("type")
    if types is not None:
        tl = [types] if isinstance(types, str) else list(types)
        if not any(is_type(v, t) for t in tl):
            yield Issue(path, "type", v, tl)
            return  # the remaining keywords would only repeat the same mistake
    if "enum" in s and not any(json_equal(v, e) for e in s["enum"]):  # True is not 1
        yield Issue(path, "enum", v, s["enum"])
    if "const" in s and not json_equal(v, s["const"]):
        yield Issue(path, "const", v, s["const"])
    for sub in s.get("allOf", ()):
        yield from _check(v, sub, root, path, rules)
    for key in ("anyOf", "oneOf"):
        if key in s:
            ok = sum(_passes(v, sub, root, rules) for sub in s[key])
            if ok == 0 or (key == "oneOf" and ok > 1):
                yield Issue(path, key, ok)
    if "not" in s and _passes(v, s["not"], root, rules):
        yield Issue(path, "not", v)
    if isinstance(v, dict) and s:  # {} takes any object, even one YAML gave non-string keys
        yield from _check_object(v, s, root, path, rules)
    elif isinstance(v, list):
        yield from _check_array(v, s, root, path, rules)
    elif isinstance(v, str):
        yield from _check_string(v, s, path, rules)
    elif is_type(v, "number"):
        yield from _check_number(v, s, path, rules)


def _passes(v: Any, s: Any, root: Any, rules: Rules) -> bool:
    return next(_check(v, s, root, "$", rules), None) is None


def _check_object(v: dict, s: dict, root: Any, path: str, rules: Rules) -> Iterator[Issue]:
    props = s.get("properties", {})
    for k in v:
        if not isinstance(k, str):  # YAML can load `on:` or `1:` as non-string keys
            yield Issue(path, "key", k)
    missing = [k for k in s.get("required", ()) if k not in v or (rules.null_is_absent and v[k] is None)]
    if missing:
        yield Issue(path, "required", missing)
    pattern_props = s.get("patternProperties", {})
    extra = s.get("additionalProperties", True)

    def known(k: Any) -> bool:
        return k in props or (isinstance(k, str) and any(re.search(p, k) for p in pattern_props))

    keys: Any = v
    if rules.shallow_first:
        unexpected = [k for k in v if not known(k)]
        if unexpected and extra is False:
            yield Issue(path, "additionalProperties", unexpected)
        keys = [*(k for k in props if k in v), *unexpected]
    for k in keys:
        x = v[k]
        if rules.null_is_absent and x is None:
            continue
        sub = f"{path}.{k}"
        if k in props:
            yield from _check(x, props[k], root, sub, rules)
        for pat, ps in pattern_props.items():
            if isinstance(k, str) and re.search(pat, k):
                yield from _check(x, ps, root, sub, rules)
        if not known(k):
            if extra is not False:
                yield from _check(x, extra, root, sub, rules)
            elif not rules.shallow_first:
                yield Issue(path, "additionalProperties", [k])
    if "propertyNames" in s:
        for k in v:
            yield from _check(k, s["propertyNames"], root, f"{path}.{k}(name)", rules)
    if len(v) < s.get("minProperties", 0):
        yield Issue(path, "minProperties", v, s["minProperties"])
    if "maxProperties" in s and len(v) > s["maxProperties"]:
        yield Issue(path, "maxProperties", v, s["maxProperties"])


def _check_array(v: list, s: dict, root: Any, path: str, rules: Rules) -> Iterator[Issue]:
    counts: list[Issue] = []
    if len(v) < s.get("minItems", 0):
        counts.append(Issue(path, "minItems", v, s["minItems"]))
    if "maxItems" in s and len(v) > s["maxItems"]:
        counts.append(Issue(path, "maxItems", v, s["maxItems"]))
    if rules.shallow_first:
        yield from counts
    prefix = s.get("prefixItems", [])
    items = s.get("items", True)
    if isinstance(items, list):  # draft-07 tuple form
        prefix, items = items, s.get("additionalItems", True)
    for i, x in enumerate(v):
        yield from _check(x, prefix[i] if i < len(prefix) else items, root, f"{path}[{i}]", rules)
    if not rules.shallow_first:
        yield from counts
    if s.get("uniqueItems") and any(json_equal(a, b) for i, a in enumerate(v) for b in v[i + 1 :]):
        yield Issue(path, "uniqueItems", v)
    if "contains" in s:
        n = sum(_passes(x, s["contains"], root, rules) for x in v)
        if n < s.get("minContains", 1) or ("maxContains" in s and n > s["maxContains"]):
            yield Issue(path, "contains", n)


def _check_string(v: str, s: dict, path: str, rules: Rules) -> Iterator[Issue]:
    longest = s.get("maxLength")
    if rules.max_string is not None and (longest is None or longest > rules.max_string):
        longest = rules.max_string
    if longest is not None and len(v) > longest:  # before minLength: a too-long blank string is too long
        yield Issue(path, "maxLength", v, longest)
    if len(v.strip() if rules.blank_is_short else v) < s.get("minLength", 0):
        yield Issue(path, "minLength", v, s["minLength"])
    if "pattern" in s and not re.search(s["pattern"], v):
        yield Issue(path, "pattern", v, s["pattern"])
    if any(p.search(v) for p in rules.refuse):
        yield Issue(path, "refused", v)


def _check_number(v: float, s: dict, path: str, rules: Rules) -> Iterator[Issue]:
    if rules.finite and not math.isfinite(v):
        yield Issue(path, "finite", v)
        return
    if "minimum" in s and v < s["minimum"]:
        yield Issue(path, "minimum", v, s["minimum"])
    if "maximum" in s and v > s["maximum"]:
        yield Issue(path, "maximum", v, s["maximum"])
    lo, hi = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
    if lo is not None and is_type(lo, "number") and v <= lo:
        yield Issue(path, "exclusiveMinimum", v, lo)
    if hi is not None and is_type(hi, "number") and v >= hi:
        yield Issue(path, "exclusiveMaximum", v, hi)
    m = s.get("multipleOf")
    if m and not float(v / m).is_integer():
        yield Issue(path, "multipleOf", v, m)


_PER_KEY = {"required": "missing required key", "additionalProperties": "unexpected key"}
_WORDS: dict[str, Callable[[Any, Any], str]] = {  # keyword -> words for (found, wanted)
    "false": lambda f, w: "no value is allowed here",
    "type": lambda f, w: f"expected {' or '.join(w)}, got {_kind(f)}",
    "enum": lambda f, w: f"{short(f)} is not one of {short(w)}",
    "const": lambda f, w: f"expected {short(w)}, got {short(f)}",
    "anyOf": lambda f, w: "matches none of the anyOf alternatives",
    "oneOf": lambda f, w: (
        f"matches {f} oneOf alternatives, expected exactly one" if f else "matches none of the oneOf alternatives"
    ),
    "not": lambda f, w: "must not match the 'not' schema",
    "key": lambda f, w: f"key {f!r} is not a string",
    "minProperties": lambda f, w: f"fewer than {w} keys",
    "maxProperties": lambda f, w: f"more than {w} keys",
    "minItems": lambda f, w: f"fewer than {w} items",
    "maxItems": lambda f, w: f"more than {w} items",
    "uniqueItems": lambda f, w: "items are not unique",
    "contains": lambda f, w: f"'contains' matched {f} items",
    "minLength": lambda f, w: f"shorter than {w} characters",
    "maxLength": lambda f, w: f"longer than {w} characters",
    "pattern": lambda f, w: f"does not match pattern {w!r}",
    "minimum": lambda f, w: f"{f} < minimum {w}",
    "maximum": lambda f, w: f"{f} > maximum {w}",
    "exclusiveMinimum": lambda f, w: f"{f} <= exclusiveMinimum {w}",
    "exclusiveMaximum": lambda f, w: f"{f} >= exclusiveMaximum {w}",
    "multipleOf": lambda f, w: f"{f} is not a multiple of {w}",
    "finite": lambda f, w: f"{f} is not a finite number",
    "refused": lambda f, w: "is refused",
}


def words(issue: Issue) -> list[str]:
    """The messages ``validate`` gives for ``issue`` (one per key missing or unexpected)."""
    if issue.keyword in _PER_KEY:
        return [f"{issue.path}: {_PER_KEY[issue.keyword]} {k!r}" for k in issue.found]
    return [f"{issue.path}: {_WORDS[issue.keyword](issue.found, issue.wanted)}"]


def _kind(v: Any) -> str:
    for t in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if is_type(v, t):
            return t
    return type(v).__name__


def short(v: Any, n: int = 80) -> str:
    """``repr(v)`` cut to ``n`` characters."""
    r = repr(v)
    return r if len(r) <= n else r[: n - 3] + "..."
