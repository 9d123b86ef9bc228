"""Strict validation of tool-call arguments against a JSON-schema subset, plus map-specific sanity checks.

Unlike ``rig.decoding.validate`` (which lists every error of a model's answer), this returns a cleaned copy
for the tool to use and stops at the first error, which the model reads back; both share JSON's type rules.

The subset (type, properties, required, additionalProperties, enum, minimum/maximum, exclusive bounds,
minLength/maxLength, items, minItems/maxItems, uniqueItems, default) covers the map tools' schemas; a schema
keyword outside it is a programming error and raises at registration, not at call time.
No lax coercion: "1000" is not a number and 1.5 is not an integer, as a typed tool API would see it.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

from rig.decoding.validate import is_type, json_equal
from rig.maps.records import Extent

MAX_STRING = 500  # cap on any string argument, whatever the schema says
_KNOWN = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "default",
    "description",
    "title",
    "examples",
}
# Payloads aimed at SQL, shells or markup have no business in a place name; refuse them outright.
_SUSPICIOUS = re.compile(
    r"(--|/\*|\*/|;\s*(drop|delete|insert|update|select|alter|create|truncate|exec)\b|\bunion\s+select\b"
    r"|<\s*script|\$\(|`|\x00)",
    re.IGNORECASE,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class ArgumentError(ValueError):
    """An argument failed validation; the message names the argument path."""


def check_schema(schema: dict[str, Any], path: str = "$") -> None:
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"{path}: schema keywords {sorted(unknown)} are not supported by rig.maps.validate")
    for name, sub in schema.get("properties", {}).items():
        check_schema(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        check_schema(schema["items"], f"{path}[]")


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> Any:
    """Return a cleaned copy (defaults filled, integral floats made int) or raise ArgumentError."""
    types = schema.get("type")
    if types is not None:
        tl = [types] if isinstance(types, str) else list(types)
        if not any(is_type(value, t) for t in tl):
            raise ArgumentError(f"{path}: expected {' or '.join(tl)}, got {type(value).__name__} {_short(value)}")
    if "enum" in schema and not any(json_equal(value, e) for e in schema["enum"]):  # True is not 1
        raise ArgumentError(f"{path}: {_short(value)} is not one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ArgumentError(f"{path}: must be a finite number, got {value}")
        if "minimum" in schema and value < schema["minimum"]:
            raise ArgumentError(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ArgumentError(f"{path}: {value} is above the maximum {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            raise ArgumentError(f"{path}: {value} must be greater than {schema['exclusiveMinimum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            raise ArgumentError(f"{path}: {value} must be less than {schema['exclusiveMaximum']}")
        if types == "integer" and isinstance(value, float):
            value = int(value)
    if isinstance(value, str):
        cap = min(schema.get("maxLength", MAX_STRING), MAX_STRING)
        if len(value) > cap:
            raise ArgumentError(f"{path}: string of {len(value)} characters exceeds the limit of {cap}")
        if len(value.strip()) < schema.get("minLength", 0):
            raise ArgumentError(f"{path}: must have at least {schema['minLength']} non-blank characters")
        if _CONTROL.search(value) or _SUSPICIOUS.search(value):
            raise ArgumentError(f"{path}: contains control characters or an injection-like sequence")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise ArgumentError(f"{path}: needs at least {schema['minItems']} items, got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ArgumentError(f"{path}: at most {schema['maxItems']} items, got {len(value)}")
        items = schema.get("items")
        value = [validate(v, items, f"{path}[{i}]") if items else v for i, v in enumerate(value)]
        if schema.get("uniqueItems") and len({repr(v) for v in value}) != len(value):
            raise ArgumentError(f"{path}: items must be unique")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        missing = [k for k in schema.get("required", []) if value.get(k) is None]
        if missing:
            raise ArgumentError(f"{path}: missing required argument(s) {', '.join(missing)}")
        extra = [k for k in value if k not in props]
        if extra and schema.get("additionalProperties", True) is False:
            raise ArgumentError(f"{path}: unexpected argument(s) {', '.join(map(str, extra))}")
        out = {}
        for k, sub in props.items():
            if value.get(k) is not None:
                out[k] = validate(value[k], sub, f"{path}.{k}")
            elif "default" in sub:
                out[k] = sub["default"]
        for k in extra:
            out[k] = value[k]
        value = out
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
