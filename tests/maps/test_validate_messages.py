"""Pins the map service's argument checks word for word: their messages are observations the model reads, and a
caller that stops at the first error reports exactly one of them, so which one comes first is pinned too."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rig.maps.records import Extent
from rig.maps.tools import MapService
from rig.maps.validate import ArgumentError, check_coordinates, check_schema, validate

POINT = {
    "type": "object",
    "properties": {
        "lat": {"type": "number", "minimum": -90, "maximum": 90},
        "lon": {"type": "number", "minimum": -180, "maximum": 180},
    },
    "required": ["lat", "lon"],
    "additionalProperties": False,
}
PLACE = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 200},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        "radius_m": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 50000},
        "mode": {"type": "string", "enum": ["walk", "bike", "drive"], "default": "walk"},
        "avoid": {
            "type": "array",
            "items": {"type": "string", "enum": ["tolls", "ferries", "highways"]},
            "uniqueItems": True,
            "maxItems": 3,
            "default": [],
        },
        "stops": {"type": "array", "minItems": 1, "maxItems": 2, "items": POINT},
        "note": {"type": ["string", "null"]},
        "ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
    },
    "required": ["query"],
    "additionalProperties": False,
}
OPEN = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
THREE = {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "required": ["a", "b", "c"]}
INJECTION = "$.query: contains control characters or an injection-like sequence"

ERRORS: list[tuple[str, Any, Any, str]] = [
    ("missing_required", PLACE, {}, "$: missing required argument(s) query"),
    ("null_required_is_missing", PLACE, {"query": None}, "$: missing required argument(s) query"),
    ("missing_several", THREE, {"b": 1}, "$: missing required argument(s) a, c"),
    ("extra_key", PLACE, {"query": "x", "zz": 1}, "$: unexpected argument(s) zz"),
    ("extra_keys_null_too", PLACE, {"zz": 1, "query": "x", "yy": None}, "$: unexpected argument(s) zz, yy"),
    ("missing_before_extra", PLACE, {"zz": 1}, "$: missing required argument(s) query"),
    ("extra_before_child", PLACE, {"query": "", "zz": 1}, "$: unexpected argument(s) zz"),
    (
        "children_in_schema_order",
        PLACE,
        {"limit": 0, "query": ""},
        "$.query: must have at least 1 non-blank characters",
    ),
    ("wrong_type_string", PLACE, {"query": 5}, "$.query: expected string, got int 5"),
    ("number_as_text", PLACE, {"query": "x", "radius_m": "1000"}, "$.radius_m: expected number, got str '1000'"),
    ("bool_is_not_integer", PLACE, {"query": "x", "limit": True}, "$.limit: expected integer, got bool True"),
    ("non_integral_float", PLACE, {"query": "x", "limit": 1.5}, "$.limit: expected integer, got float 1.5"),
    ("type_list", PLACE, {"query": "x", "note": 3}, "$.note: expected string or null, got int 3"),
    (
        "type_error_long_value",
        PLACE,
        {"query": ["a" * 80]},
        "$.query: expected string, got list ['" + "a" * 55 + "...",
    ),
    ("top_level_type", PLACE, [1, 2], "$: expected object, got list [1, 2]"),
    ("top_level_none", PLACE, None, "$: expected object, got NoneType None"),
    ("enum_miss", PLACE, {"query": "x", "mode": "fly"}, "$.mode: 'fly' is not one of ['walk', 'bike', 'drive']"),
    ("enum_long_value", {"enum": ["a", "b"]}, "z" * 100, "$: '" + "z" * 56 + "... is not one of ['a', 'b']"),
    ("enum_bool_not_int", {"enum": [1, 2]}, True, "$: True is not one of [1, 2]"),
    ("below_minimum", PLACE, {"query": "x", "limit": 0}, "$.limit: 0 is below the minimum 1"),
    ("above_maximum", PLACE, {"query": "x", "limit": 21}, "$.limit: 21 is above the maximum 20"),
    ("exclusive_minimum", PLACE, {"query": "x", "radius_m": 0}, "$.radius_m: 0 must be greater than 0"),
    ("exclusive_maximum", PLACE, {"query": "x", "radius_m": 50000}, "$.radius_m: 50000 must be less than 50000"),
    ("infinite", PLACE, {"query": "x", "radius_m": math.inf}, "$.radius_m: must be a finite number, got inf"),
    ("nan", {"type": "number"}, math.nan, "$: must be a finite number, got nan"),
    ("infinite_untyped", {"minimum": 0}, -math.inf, "$: must be a finite number, got -inf"),
    ("infinite_integer", {"type": "integer"}, math.inf, "$: expected integer, got float inf"),
    ("too_long", PLACE, {"query": "q" * 201}, "$.query: string of 201 characters exceeds the limit of 200"),
    ("over_cap_without_max", {"type": "string"}, "q" * 501, "$: string of 501 characters exceeds the limit of 500"),
    (
        "schema_max_above_cap",
        {"type": "string", "maxLength": 900},
        "q" * 600,
        "$: string of 600 characters exceeds the limit of 500",
    ),
    ("untyped_string_capped", {}, "q" * 501, "$: string of 501 characters exceeds the limit of 500"),
    ("blank", PLACE, {"query": "   "}, "$.query: must have at least 1 non-blank characters"),
    (
        "long_and_blank",
        {"type": "string", "minLength": 1},
        " " * 600,
        "$: string of 600 characters exceeds the limit of 500",
    ),
    ("empty", PLACE, {"query": ""}, "$.query: must have at least 1 non-blank characters"),
    ("sql", PLACE, {"query": "cafe; DROP TABLE pois"}, INJECTION),
    ("sql_comment", PLACE, {"query": "cafe -- x"}, INJECTION),
    ("union_select", PLACE, {"query": "1 UNION SELECT *"}, INJECTION),
    ("script", PLACE, {"query": "<script>alert(1)</script>"}, INJECTION),
    ("shell", PLACE, {"query": "$(rm -rf /)"}, INJECTION),
    ("backtick", PLACE, {"query": "`ls`"}, INJECTION),
    ("control", PLACE, {"query": "caf\x01e"}, INJECTION),
    (
        "injection_in_items",
        {"type": "array", "items": {"type": "string"}},
        ["ok", "a;drop table x"],
        "$[1]: contains control characters or an injection-like sequence",
    ),
    ("too_few_items", PLACE, {"query": "x", "stops": []}, "$.stops: needs at least 1 items, got 0"),
    (
        "too_many_items",
        PLACE,
        {"query": "x", "avoid": ["tolls", "ferries", "highways", "tolls"]},
        "$.avoid: at most 3 items, got 4",
    ),
    ("counts_before_items", PLACE, {"query": "x", "stops": [{"lat": "a"}, {}, {}]}, "$.stops: at most 2 items, got 3"),
    ("nested_missing", PLACE, {"query": "x", "stops": [{"lat": 1}]}, "$.stops[0]: missing required argument(s) lon"),
    (
        "nested_null_missing",
        PLACE,
        {"query": "x", "stops": [{"lat": 1, "lon": None}]},
        "$.stops[0]: missing required argument(s) lon",
    ),
    (
        "nested_type",
        PLACE,
        {"query": "x", "stops": [{"lat": 1, "lon": 2}, {"lat": "a", "lon": 2}]},
        "$.stops[1].lat: expected number, got str 'a'",
    ),
    (
        "nested_bound",
        PLACE,
        {"query": "x", "stops": [{"lat": 91, "lon": 2}]},
        "$.stops[0].lat: 91 is above the maximum 90",
    ),
    (
        "nested_extra",
        PLACE,
        {"query": "x", "stops": [{"lat": 1, "lon": 2, "alt": 3}]},
        "$.stops[0]: unexpected argument(s) alt",
    ),
    (
        "item_enum",
        PLACE,
        {"query": "x", "avoid": ["tolls", "stairs"]},
        "$.avoid[1]: 'stairs' is not one of ['tolls', 'ferries', 'highways']",
    ),
    ("item_type", PLACE, {"query": "x", "ids": [1, "2"]}, "$.ids[1]: expected integer, got str '2'"),
    ("not_unique", PLACE, {"query": "x", "avoid": ["tolls", "tolls"]}, "$.avoid: items must be unique"),
    ("not_unique_after_int", PLACE, {"query": "x", "ids": [3.0, 3]}, "$.ids: items must be unique"),
    (
        "items_before_unique",
        PLACE,
        {"query": "x", "avoid": ["tolls", "tolls", "stairs"]},
        "$.avoid[2]: 'stairs' is not one of ['tolls', 'ferries', 'highways']",
    ),
    (
        "none_in_array",
        {"type": "array", "items": {"type": "string"}},
        ["a", None],
        "$[1]: expected string, got NoneType None",
    ),
]


@pytest.mark.parametrize(("schema", "value", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_message(schema: Any, value: Any, message: str) -> None:
    with pytest.raises(ArgumentError) as info:
        validate(value, schema)
    assert str(info.value) == message


DEFAULTS = {"limit": 5, "mode": "walk", "avoid": []}
CLEANED: list[tuple[str, Any, Any, Any]] = [
    ("defaults_filled", PLACE, {"query": "cafe"}, {"query": "cafe", **DEFAULTS}),
    (
        "null_optional_takes_default",
        PLACE,
        {"query": "cafe", "limit": None, "mode": None},
        {"query": "cafe", **DEFAULTS},
    ),
    ("integral_float_made_int", PLACE, {"query": "cafe", "limit": 3.0}, {"query": "cafe", **DEFAULTS, "limit": 3}),
    (
        "all_given",
        PLACE,
        {
            "query": "cafe",
            "limit": 2,
            "radius_m": 0.5,
            "mode": "bike",
            "avoid": ["tolls"],
            "stops": [{"lat": 60.1, "lon": 24.9}],
            "note": None,
            "ids": [1, 2],
        },
        {
            "query": "cafe",
            "limit": 2,
            "radius_m": 0.5,
            "mode": "bike",
            "avoid": ["tolls"],
            "stops": [{"lat": 60.1, "lon": 24.9}],
            "ids": [1, 2],
        },
    ),
    ("extras_kept_when_open", OPEN, {"b": [1], "a": 1}, {"a": 1, "b": [1]}),
    ("enum_int_equals_float", {"enum": [1, 2]}, 1.0, 1.0),
    ("cap_reached_not_passed", {"type": "string"}, "q" * 500, "q" * 500),
    ("newline_and_tab_allowed", PLACE, {"query": "cafe\nbar\t"}, {"query": "cafe\nbar\t", **DEFAULTS}),
    ("list_without_items_unchecked", {"type": "array"}, ["ok", "a;drop table x"], ["ok", "a;drop table x"]),
    ("empty_schema", {}, {"anything": [1]}, {"anything": [1]}),
]


@pytest.mark.parametrize(("schema", "value", "cleaned"), [c[1:] for c in CLEANED], ids=[c[0] for c in CLEANED])
def test_cleaned(schema: Any, value: Any, cleaned: Any) -> None:
    out = validate(value, schema)
    assert repr(out) == repr(cleaned)  # key order (the schema's, then extras) and int versus float pinned too


def test_schema_keywords_outside_the_subset_refused() -> None:
    check_schema(PLACE)
    with pytest.raises(ValueError) as info:
        check_schema({"type": "object", "properties": {"q": {"type": "string", "pattern": "^a", "format": "x"}}})
    assert str(info.value) == "$.q: schema keywords ['format', 'pattern'] are not supported by rig.maps.validate"
    with pytest.raises(ValueError) as info:
        check_schema({"type": "array", "items": {"anyOf": []}})
    assert str(info.value) == "$[]: schema keywords ['anyOf'] are not supported by rig.maps.validate"
    with pytest.raises(ValueError) as info:  # draft 4's boolean bound would be skipped, not checked
        check_schema({"type": "object", "properties": {"r": {"exclusiveMinimum": True, "maxLength": "9"}}})
    assert str(info.value) == "$.r: schema bounds ['exclusiveMinimum', 'maxLength'] are not numbers"


HELSINKI = Extent(min_lat=59.9, min_lon=24.5, max_lat=60.4, max_lon=25.3)


@pytest.mark.parametrize(
    ("args", "extent", "message"),
    [
        ({"lat": 95, "lon": 24.9}, None, "$.lat: 95.0 is outside [-90, 90] (lat and lon look swapped)"),
        ({"lat": 95, "lon": 124.9}, None, "$.lat: 95.0 is outside [-90, 90]"),
        ({"a": {"lat": 60, "lon": 190}}, None, "$.a.lon: 190.0 is outside [-180, 180]"),
        ({"p": [{"lat": math.nan, "lon": 1}]}, None, "$.p[0]: lat and lon must be finite numbers, got (nan, 1.0)"),
        (
            {"lat": 24.9, "lon": 60.2},
            HELSINKI,
            "$: (24.9, 60.2) is outside the map but (60.2, 24.9) is inside: lat and lon look swapped",
        ),
    ],
)
def test_coordinate_message(args: Any, extent: Extent | None, message: str) -> None:
    with pytest.raises(ArgumentError) as info:
        check_coordinates(args, extent)
    assert str(info.value) == message


def test_coordinates_fine() -> None:
    check_coordinates({"lat": 60.2, "lon": 24.9, "x": {"lat": "a", "lon": True}}, HELSINKI)
    check_coordinates({"lat": 10.0, "lon": 10.0}, HELSINKI)  # far away, but not a swap


@pytest.mark.parametrize(
    ("tool", "args", "error"),
    [
        ("geocode", {"query": ""}, "$.query: must have at least 1 non-blank characters"),
        ("geocode", {"query": "Kamppi", "limit": 0}, "$.limit: 0 is below the minimum 1"),
        ("geocode", {"query": "Kamppi", "city": None, "limit": 50, "x": 1}, "$: unexpected argument(s) x"),
        (
            "route",
            {"origin": {"lat": 60.1}, "destination": {"lat": 60.2, "lon": 24.9}},
            "$.origin: missing required argument(s) lon",
        ),
        (
            "route",
            {"origin": {"lat": 95, "lon": 24.9}, "destination": {"lat": 60.2, "lon": 24.9}},
            "$.origin.lat: 95.0 is outside [-90, 90] (lat and lon look swapped)",
        ),
        (
            "route",
            {"origin": {"lat": 60.1, "lon": 24.9}, "destination": {"lat": 60.2, "lon": 24.9}, "mode": "fly"},
            "$.mode: 'fly' is not one of ['walk', 'bike', 'drive']",
        ),
        (
            "route",
            {"origin": {"lat": 60.1, "lon": 24.9}, "destination": {"lat": 60.2, "lon": 24.9}, "avoid": ["tolls"] * 2},
            "$.avoid: items must be unique",
        ),
        ("nearby", {"lat": 60.1, "lon": 24.9, "radius_m": 0}, "$.radius_m: 0 must be greater than 0"),
        ("nearby", {"lat": "60.1", "lon": 24.9}, "$.lat: expected number, got str '60.1'"),
        ("nearby", '{"lat": 60.1,', "arguments are not valid JSON: Expecting property name enclosed in double quotes"),
        (
            "distance",
            {"a": {"lat": math.nan, "lon": 1}, "b": {"lat": 1, "lon": 2}},
            "$.a: lat and lon must be finite numbers, got (nan, 1.0)",
        ),
    ],
)
def test_service_answers_bad_arguments(tool: str, args: Any, error: str) -> None:
    result = MapService().call(tool, args)  # no pack, no store: refused before either is read
    assert (result.ok, result.error_category, result.error) == (False, "invalid_arguments", error)
