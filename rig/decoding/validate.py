"""A small JSON-Schema validator (draft 2020-12 semantics for the keywords benchmarks use).

The rig does not depend on ``jsonschema``; this covers what answer schemas use plus the common assertion
keywords, so outputs from unconstrained engines are judged by the same rules as constrained ones.
``format`` is an annotation (as in jsonschema's default mode); unknown keywords are ignored.
"""

from __future__ import annotations

import math
import re
from typing import Any

_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")


def validate(value: Any, schema: Any, *, root: Any = None) -> list[str]:
    """Error messages for ``value`` against ``schema`` (empty list = valid). Paths are ``$``-rooted."""
    errors: list[str] = []
    _check(value, schema, root if root is not None else schema, "$", errors)
    return errors


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


def _check(v: Any, s: Any, root: Any, path: str, errs: list[str]) -> None:
    if s is True or s == {}:
        return
    if s is False:
        errs.append(f"{path}: no value is allowed here")
        return
    if not isinstance(s, dict):
        raise TypeError(f"schema at {path} is not an object or boolean: {s!r}")
    if "$ref" in s:
        _check(v, resolve_ref(s["$ref"], root), root, path, errs)
    types = s.get("type")
    if types is not None:
        tl = [types] if isinstance(types, str) else list(types)
        if not any(is_type(v, t) for t in tl):
            errs.append(f"{path}: expected {' or '.join(tl)}, got {_kind(v)}")
            return  # the remaining keywords would only repeat the same mistake
    if "enum" in s and not any(json_equal(v, e) for e in s["enum"]):
        errs.append(f"{path}: {_short(v)} is not one of {_short(s['enum'])}")
    if "const" in s and not json_equal(v, s["const"]):
        errs.append(f"{path}: expected {_short(s['const'])}, got {_short(v)}")
    for sub in s.get("allOf", ()):
        _check(v, sub, root, path, errs)
    for key in ("anyOf", "oneOf"):
        if key in s:
            ok = sum(not validate(v, sub, root=root) for sub in s[key])
            if ok == 0:
                errs.append(f"{path}: matches none of the {key} alternatives")
            elif key == "oneOf" and ok > 1:
                errs.append(f"{path}: matches {ok} oneOf alternatives, expected exactly one")
    if "not" in s and not validate(v, s["not"], root=root):
        errs.append(f"{path}: must not match the 'not' schema")
    if isinstance(v, dict):
        _check_object(v, s, root, path, errs)
    elif isinstance(v, list):
        _check_array(v, s, root, path, errs)
    elif isinstance(v, str):
        _check_string(v, s, path, errs)
    elif is_type(v, "number"):
        _check_number(v, s, path, errs)


def _check_object(v: dict, s: dict, root: Any, path: str, errs: list[str]) -> None:
    props = s.get("properties", {})
    for k in v:
        if not isinstance(k, str):  # YAML can load `on:` or `1:` as non-string keys
            errs.append(f"{path}: key {k!r} is not a string")
    for k in s.get("required", ()):
        if k not in v:
            errs.append(f"{path}: missing required key {k!r}")
    pattern_props = s.get("patternProperties", {})
    extra = s.get("additionalProperties", True)
    for k, x in v.items():
        sub = f"{path}.{k}"
        matched = False
        if k in props:
            matched = True
            _check(x, props[k], root, sub, errs)
        for pat, ps in pattern_props.items():
            if isinstance(k, str) and re.search(pat, k):
                matched = True
                _check(x, ps, root, sub, errs)
        if not matched:
            if extra is False:
                errs.append(f"{path}: unexpected key {k!r}")
            else:
                _check(x, extra, root, sub, errs)
    if "propertyNames" in s:
        for k in v:
            _check(k, s["propertyNames"], root, f"{path}.{k}(name)", errs)
    if len(v) < s.get("minProperties", 0):
        errs.append(f"{path}: fewer than {s['minProperties']} keys")
    if "maxProperties" in s and len(v) > s["maxProperties"]:
        errs.append(f"{path}: more than {s['maxProperties']} keys")


def _check_array(v: list, s: dict, root: Any, path: str, errs: list[str]) -> None:
    prefix = s.get("prefixItems", [])
    items = s.get("items", True)
    if isinstance(items, list):  # draft-07 tuple form
        prefix, items = items, s.get("additionalItems", True)
    for i, x in enumerate(v):
        _check(x, prefix[i] if i < len(prefix) else items, root, f"{path}[{i}]", errs)
    if len(v) < s.get("minItems", 0):
        errs.append(f"{path}: fewer than {s['minItems']} items")
    if "maxItems" in s and len(v) > s["maxItems"]:
        errs.append(f"{path}: more than {s['maxItems']} items")
    if s.get("uniqueItems") and any(json_equal(a, b) for i, a in enumerate(v) for b in v[i + 1 :]):
        errs.append(f"{path}: items are not unique")
    if "contains" in s:
        n = sum(not validate(x, s["contains"], root=root) for x in v)
        if n < s.get("minContains", 1) or ("maxContains" in s and n > s["maxContains"]):
            errs.append(f"{path}: 'contains' matched {n} items")


def _check_string(v: str, s: dict, path: str, errs: list[str]) -> None:
    if len(v) < s.get("minLength", 0):
        errs.append(f"{path}: shorter than {s['minLength']} characters")
    if "maxLength" in s and len(v) > s["maxLength"]:
        errs.append(f"{path}: longer than {s['maxLength']} characters")
    if "pattern" in s and not re.search(s["pattern"], v):
        errs.append(f"{path}: does not match pattern {s['pattern']!r}")


def _check_number(v: float, s: dict, path: str, errs: list[str]) -> None:
    if "minimum" in s and v < s["minimum"]:
        errs.append(f"{path}: {v} < minimum {s['minimum']}")
    if "maximum" in s and v > s["maximum"]:
        errs.append(f"{path}: {v} > maximum {s['maximum']}")
    lo, hi = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
    if lo is not None and is_type(lo, "number") and v <= lo:
        errs.append(f"{path}: {v} <= exclusiveMinimum {lo}")
    if hi is not None and is_type(hi, "number") and v >= hi:
        errs.append(f"{path}: {v} >= exclusiveMaximum {hi}")
    m = s.get("multipleOf")
    if m and not float(v / m).is_integer():
        errs.append(f"{path}: {v} is not a multiple of {m}")


def _kind(v: Any) -> str:
    for t in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if is_type(v, t):
            return t
    return type(v).__name__


def _short(v: Any, n: int = 80) -> str:
    r = repr(v)
    return r if len(r) <= n else r[: n - 3] + "..."
