"""Tool-call arguments checked against a JSON-schema subset, plus map-specific sanity checks.

The checks are ``rig.decoding.validate``'s, under the stricter rules of a typed tool API (``TOOL_ARGUMENTS``); this
module stops at the first issue and words it, since the model reads the message back, and returns a cleaned copy
for the tool to use. The subset (type, properties, required, additionalProperties, enum, minimum/maximum,
exclusive bounds, minLength/maxLength, items, minItems/maxItems, uniqueItems, default) covers the map tools'
schemas; a schema keyword outside it is a programming error and raises at registration, not at call time.
No lax coercion: "1000" is not a number and 1.5 is not an integer, as a typed tool API would see it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, TypeGuard

from rig.decoding.validate import Issue, Rules, issues, short, words
from rig.maps.records import Extent

MAX_STRING = 500  # cap on any string argument, whatever the schema says
_BOUNDS = (  # check_schema wants each a number
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
)
_STRUCTURE = {"type", "properties", "required", "additionalProperties", "enum", "items", "uniqueItems"}
_KNOWN = {*_BOUNDS, *_STRUCTURE, "default", "description", "title", "examples"}
# Payloads aimed at SQL, shells or markup have no business in a place name; refuse them outright.
_SUSPICIOUS = re.compile(
    r"(--|/\*|\*/|;\s*(drop|delete|insert|update|select|alter|create|truncate|exec)\b|\bunion\s+select\b"
    r"|<\s*script|\$\(|`|\x00)",
    re.IGNORECASE,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# A typed tool API's reading: the model's first mistake is reported (missing and unexpected arguments before a bad
# value inside one), a null argument is an omitted one, and strings and numbers are held to the limits above.
TOOL_ARGUMENTS = Rules(
    shallow_first=True,
    null_is_absent=True,
    finite=True,
    max_string=MAX_STRING,
    blank_is_short=True,
    refuse=(_CONTROL, _SUSPICIOUS),
)


class ArgumentError(ValueError):
    """An argument failed validation; the message names the argument path."""


def check_schema(schema: dict[str, Any], path: str = "$") -> None:
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"{path}: schema keywords {sorted(unknown)} are not supported by rig.maps.validate")
    odd = [k for k in _BOUNDS if k in schema and not _is_number(schema[k])]
    if odd:  # the validator skips a bound that is no number (draft 4's boolean exclusiveMinimum)
        raise ValueError(f"{path}: schema bounds {odd} are not numbers")
    for name, sub in schema.get("properties", {}).items():
        check_schema(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        check_schema(schema["items"], f"{path}[]")


def validate(value: Any, schema: dict[str, Any]) -> Any:
    """Return a cleaned copy (defaults filled, integral floats made int) or raise ArgumentError."""
    for issue in issues(value, schema, TOOL_ARGUMENTS):
        raise ArgumentError(_message(issue))
    return _cleaned(value, schema)


_WORDS: dict[str, Callable[[Any, Any], str]] = {  # keyword -> words for (found, wanted)
    "type": lambda f, w: f"expected {' or '.join(w)}, got {type(f).__name__} {short(f, 60)}",
    "enum": lambda f, w: f"{short(f, 60)} is not one of {w}",
    "finite": lambda f, w: f"must be a finite number, got {f}",
    "minimum": lambda f, w: f"{f} is below the minimum {w}",
    "maximum": lambda f, w: f"{f} is above the maximum {w}",
    "exclusiveMinimum": lambda f, w: f"{f} must be greater than {w}",
    "exclusiveMaximum": lambda f, w: f"{f} must be less than {w}",
    "maxLength": lambda f, w: f"string of {len(f)} characters exceeds the limit of {w}",
    "minLength": lambda f, w: f"must have at least {w} non-blank characters",
    "refused": lambda f, w: "contains control characters or an injection-like sequence",
    "minItems": lambda f, w: f"needs at least {w} items, got {len(f)}",
    "maxItems": lambda f, w: f"at most {w} items, got {len(f)}",
    "uniqueItems": lambda f, w: "items must be unique",
    "required": lambda f, w: f"missing required argument(s) {', '.join(f)}",
    "additionalProperties": lambda f, w: f"unexpected argument(s) {', '.join(map(str, f))}",
}


def _message(issue: Issue) -> str:
    word = _WORDS.get(issue.keyword)
    if word is None:  # what the subset cannot say (a non-string key), in the validator's own words
        return "; ".join(words(issue))
    return f"{issue.path}: {word(issue.found, issue.wanted)}"


def _cleaned(value: Any, schema: dict[str, Any]) -> Any:
    """The copy a tool is called with (``value`` is valid): nulls dropped, defaults filled, integral floats int."""
    if isinstance(value, float) and schema.get("type") == "integer":
        return int(value)
    if isinstance(value, list):
        items = schema.get("items")
        return [_cleaned(v, items) if items else v for v in value]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out = {}
        for k, sub in props.items():
            if value.get(k) is not None:
                out[k] = _cleaned(value[k], sub)
            elif "default" in sub:
                out[k] = sub["default"]
        out.update((k, v) for k, v in value.items() if k not in props)
        return out
    return value


def check_coordinates(args: Any, extent: Extent | None, path: str = "$") -> None:
    """Every dict with lat and lon is a coordinate: refuse points whose lat/lon look swapped."""
    if isinstance(args, dict):
        lat, lon = args.get("lat"), args.get("lon")
        if _is_number(lat) and _is_number(lon):
            _check_point(float(lat), float(lon), extent, path)
        for k, v in args.items():
            check_coordinates(v, extent, f"{path}.{k}")
    elif isinstance(args, list):
        for i, v in enumerate(args):
            check_coordinates(v, extent, f"{path}[{i}]")


def _is_number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_point(lat: float, lon: float, extent: Extent | None, path: str) -> None:
    if not (math.isfinite(lat) and math.isfinite(lon)):
        raise ArgumentError(f"{path}: lat and lon must be finite numbers, got ({lat}, {lon})")
    if not (-90 <= lat <= 90):
        hint = " (lat and lon look swapped)" if -90 <= lon <= 90 else ""
        raise ArgumentError(f"{path}.lat: {lat} is outside [-90, 90]{hint}")
    if not (-180 <= lon <= 180):
        raise ArgumentError(f"{path}.lon: {lon} is outside [-180, 180]")
    if extent is not None:
        margin = 0.5  # degrees (~50 km): a point this far outside a city pack is not a near miss
        if not extent.contains(lat, lon, margin) and extent.contains(lon, lat, margin):
            raise ArgumentError(
                f"{path}: ({lat}, {lon}) is outside the map but ({lon}, {lat}) is inside: lat and lon look swapped"
            )
