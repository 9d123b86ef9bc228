"""Schemas and hand-written documents (JSON and YAML) with the verdict every grammar engine must give.

``valid_but_rejected`` marks documents that satisfy the schema but fall outside the grammar's deliberate
under-approximation (fixed key order, fixed YAML layout); all other accepted documents must validate.
"""

from __future__ import annotations

from dataclasses import dataclass

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "mode": {"enum": ["fast", "slow", "fastest"]},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
    },
    "required": ["name", "mode"],
    "additionalProperties": False,
}

NESTED = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "sub": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
                    },
                },
                "required": ["id"],
            },
        },
        "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
    },
    "required": ["items"],
}

UNION = {
    "anyOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False},
        {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]},
        {"type": "null"},
    ]
}

OPTIONAL_ONLY = {
    "type": "object",
    "properties": {"x": {"type": "number"}, "y": {"type": "number"}, "label": {"const": "pt"}},
}

FREE = {"type": "object", "properties": {"meta": {"type": "object"}, "any": {}}, "required": ["meta"]}

TOP_ARRAY = {"type": "array", "items": {"enum": ["a", 1, True, None]}, "minItems": 1, "maxItems": 2}


# A closed alternative next to a schema-free one that starts the same way: greedy lexers (llguidance) must
# not commit to the closed one (regression: schema-free values are kept regular, see prims.json_any).
MIXED = {
    "type": "array",
    "items": {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "origin": {"type": "string"},
                    "dest": {"type": "string"},
                    "pkg": {"type": "object", "properties": {"w": {"type": "number"}}, "required": ["w"]},
                },
                "required": ["origin", "dest", "pkg"],
                "additionalProperties": False,
            },
            {"type": "object"},
            {"type": "string"},
        ]
    },
}

SHORT = {
    "type": "object",
    "properties": {"code": {"type": "string", "minLength": 2, "maxLength": 3}},
    "required": ["code"],
}


# Free keys, counted: maxProperties is enforced where an object declares no properties (CallNavi's argument objects).
BOUNDED_MAP = {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 2}


@dataclass(frozen=True)
class Case:
    schema_name: str
    text: str
    accept: bool
    why: str
    valid_but_rejected: bool = False


SCHEMAS = {
    "person": PERSON,
    "nested": NESTED,
    "union": UNION,
    "optional": OPTIONAL_ONLY,
    "free": FREE,
    "top_array": TOP_ARRAY,
    "short": SHORT,
    "mixed": MIXED,
    "bounded_map": BOUNDED_MAP,
}

JSON_CASES = [
    Case("person", '{"name": "Ann", "mode": "fast"}', True, "required keys only"),
    Case(
        "person",
        '{"name":"Ann","age":41,"tags":["a","b"],"mode":"slow","score":-1.5e-3,"ok":true,"note":null}',
        True,
        "every key, compact",
    ),
    Case("person", '{\n  "name": "Ann",\n  "tags": [\n    "x"\n  ],\n  "mode": "fastest"\n}', True, "pretty-printed"),
    Case(
        "person",
        '{"name": "Zo\u00eb \\u00e9 \\"q\\" \\\\ \\/ \\n\\t \u65e5\u672c \U0001f600", "mode": "fast"}',
        True,
        "unicode and escapes",
    ),
    Case("person", '{"name": "a", "tags": [], "mode": "fast"}', True, "empty array"),
    Case("person", '{"name": "a", "mode": "fast", "note": "n"}', True, "nullable string as string"),
    Case("person", '{"mode": "fast"}', False, "missing required key"),
    Case("person", '{"name": "a", "mode": "medium"}', False, "bad enum"),
    Case("person", '{"name": "a", "mode": "fast", "extra": 1}', False, "extra key"),
    Case("person", '{"mode": "fast", "name": "a"}', False, "keys out of declared order", valid_but_rejected=True),
    Case("person", '{"name": "a\tb", "mode": "fast"}', False, "raw control character in string"),
    Case("person", '{"name": "a\\x41", "mode": "fast"}', False, "invalid escape"),
    Case("person", '{"name": "a", "tags": ["1", "2", "3", "4"], "mode": "fast"}', False, "maxItems exceeded"),
    Case("person", '{"name": "a", "age": 1.5, "mode": "fast"}', False, "float for integer"),
    Case("person", '{"name": "a", "age": 01, "mode": "fast"}', False, "leading zero"),
    Case("person", '{"name": null, "mode": "fast"}', False, "null for string"),
    Case("person", '{"name": "a", "mode": "fast",}', False, "trailing comma"),
    Case("person", '{"name": "a",' + " " * 30 + '"mode": "fast"}', False, "unbounded whitespace"),
    Case("person", '{"name": "a",\n' + " " * 24 + '"mode": "fast"}', True, "newline plus 24 spaces"),
    Case("person", ' {"name": "a", "mode": "fast"}', False, "leading whitespace"),
    Case("nested", '{"items": [{"id": 1, "sub": [{"k": "a"}, {"k": "b"}]}, {"id": 2}]}', True, "arrays of objects"),
    Case("nested", '{"items": [{"id": 1, "sub": []}], "matrix": [[1, 2], [], [3]]}', True, "empty and nested arrays"),
    Case("nested", '{"items": []}', False, "minItems"),
    Case("nested", '{"items": [{"id": 1, "sub": [{}]}]}', False, "missing key in nested object"),
    Case("nested", '{"items": [{"id": 1, "sub": [{"k": "a", "j": 1}]}]}', False, "extra key in nested object"),
    Case("union", '{"a": "x"}', True, "first alternative"),
    Case("union", '{"b": 1}', True, "second alternative"),
    Case("union", "null", True, "null alternative"),
    Case("union", '{"a": 1}', False, "wrong type in alternative"),
    Case("union", "{}", False, "no alternative matches"),
    Case("optional", "{}", True, "all keys optional: empty"),
    Case("optional", '{"y": 2}', True, "skip leading optional key"),
    Case("optional", '{"x": 1, "label": "pt"}', True, "skip middle optional key"),
    Case("optional", '{"label": "other"}', False, "const"),
    Case("optional", '{"x": 1,}', False, "dangling comma after optional"),
    Case(
        "free",
        '{"meta": {"any key": [1, {"deep": null}], "k2": "v"}, "any": [true, 2.5, "s"]}',
        True,
        "schema-free object and value",
    ),
    Case("free", '{"meta": {}}', True, "empty free object"),
    Case("free", '{"meta": []}', False, "array for object"),
    Case("bounded_map", "{}", True, "no entries"),
    Case("bounded_map", '{"a": 1, "b b": 2}', True, "maxProperties entries"),
    Case("bounded_map", '{"a": 1, "b": 2, "c": 3}', False, "one entry past maxProperties"),
    Case("bounded_map", '{"a": "x"}', False, "value of the wrong type"),
    Case("top_array", '["a", 1]', True, "enum of mixed scalars"),
    Case("top_array", "[true]", True, "boolean enum value"),
    Case("top_array", "[]", False, "minItems"),
    Case("top_array", '["a", null, 1]', False, "maxItems"),
    Case("top_array", '["b"]', False, "not in enum"),
    Case("mixed", '[{"origin": "a", "dest": "b", "pkg": {"w": 1}}]', True, "closed alternative"),
    Case("mixed", '[{"origin": "a", "dest": "b"}]', True, "prefix of the closed alternative, schema-free match"),
    Case("mixed", '[{"x": [1, {"y": null}]}, "s", {}]', True, "schema-free and string alternatives"),
    Case("mixed", "[1]", False, "no alternative"),
    Case("short", '{"code": "ab"}', True, "minLength"),
    Case("short", '{"code": "\u00e9\U0001f600x"}', True, "length in code points"),
    Case("short", '{"code": "\\u00e9b\\n"}', True, "escapes count as one character"),
    Case("short", '{"code": "a"}', False, "too short"),
    Case("short", '{"code": "abcd"}', False, "too long"),
    Case(
        "short",
        '{"code": "a\\ud83d\\ude00"}',
        False,
        "surrogate-pair escape under a length bound",
        valid_but_rejected=True,
    ),
]

YAML_CASES = [
    Case("person", 'name: "Ann"\nmode: "fast"\n', True, "required keys only"),
    Case(
        "person",
        'name: "Ann"\nage: 41\ntags:\n  - "a"\n  - "b"\nmode: "slow"\nscore: -1.5e-3\nok: true\nnote: null\n',
        True,
        "every key",
    ),
    Case(
        "person",
        'name: "Zo\u00eb \\u00e9 \\"q\\" \\\\ \\/ \\n\\t \u65e5\u672c \U0001f600 # not a comment"\nmode: "fast"\n',
        True,
        "unicode and escapes",
    ),
    Case("person", 'name: "a"\ntags: []\nmode: "fast"\n', True, "empty array"),
    Case("person", 'name: "a"\nmode: "fast"\nscore: 1.0e+5\n', True, "float with signed exponent"),
    Case("person", 'name: "a"\nmode: "fast"\nscore: 7\n', True, "integer for number"),
    Case("person", 'mode: "fast"\n', False, "missing required key"),
    Case("person", 'name: "a"\nmode: "medium"\n', False, "bad enum"),
    Case("person", 'name: "a"\nmode: "fast"\nextra: 1\n', False, "extra key"),
    Case("person", 'name: "a"\ntags:\n   - "x"\nmode: "fast"\n', False, "wrong indent (3 spaces)"),
    Case("person", 'name: "a"\ntags:\n- "x"\nmode: "fast"\n', False, "sequence not indented", valid_but_rejected=True),
    Case("person", 'name: "a"\n  mode: "fast"\n', False, "indented sibling key"),
    Case("person", 'name: a\nmode: "fast"\n', False, "plain (unquoted) string"),
    Case("person", 'name: "a"\nmode: fast\n', False, "unquoted enum"),
    Case("person", 'name: "a"\nmode: "fast"\nok: yes\n', False, "YAML 1.1 boolean word"),
    Case("person", 'name: "a"\nmode: "fast"\nscore: 1e5\n', False, "exponent without dot (loads as str)"),
    Case("person", 'name: "a"\nmode: "fast"\nage: 1.0\n', False, "float for integer"),
    Case("person", 'name: "a"\nmode: "fast"', False, "missing final newline"),
    # raw inside quotes: rig's loader escapes what PyYAML would fold or refuse, so the value is a JSON reply's
    Case("person", 'name: "a\u2028b"\nmode: "fast"\n', True, "raw U+2028 inside quotes (kept by rig's loader)"),
    Case("person", 'name: "a\x85\x80b"\nmode: "fast"\n', True, "raw NEL and C1 control inside quotes (kept)"),
    Case("person", 'name: "a\x7fb"\nmode: "fast"\n', False, "raw DEL (PyYAML refuses it)"),
    Case("person", 'name: "\\ud83d\\ude00"\nmode: "fast"\n', False, "surrogate escapes (PyYAML keeps them unpaired)"),
    Case("person", 'name: "a"\nmode: "fast"\n# done\n', False, "comment"),
    Case("person", 'name: "a"\ntags: [ ]\nmode: "fast"\n', False, "flow array with blank"),
    Case(
        "nested",
        'items:\n  - id: 1\n    sub:\n      - k: "a"\n      - k: "b"\n  - id: 2\n',
        True,
        "sequence of mappings with nested sequence of mappings",
    ),
    Case(
        "nested",
        "items:\n  - id: 1\n    sub: []\nmatrix:\n  -\n    - 1\n    - 2\n  - []\n",
        True,
        "empty and nested sequences",
    ),
    Case("nested", "items: []\n", False, "minItems"),
    Case("nested", "items:\n  - id: 1\n    sub:\n      - {}\n", False, "missing key in nested mapping"),
    Case("nested", "items:\n  -\n    id: 1\n", False, "mapping not on the dash line", valid_but_rejected=True),
    Case("nested", "items:\n  - id: 1\n   sub: []\n", False, "misaligned key in sequence item"),
    Case("union", 'a: "x"\n', True, "first alternative"),
    Case("union", "b: 1\n", True, "second alternative"),
    Case("union", "null\n", True, "null alternative"),
    Case("union", "{}\n", False, "no alternative matches"),
    Case("union", "a: 1\n", False, "wrong type in alternative"),
    Case("optional", "{}\n", True, "all keys optional: empty"),
    Case("optional", "y: 2\n", True, "skip leading optional key"),
    Case("optional", 'x: 1\nlabel: "pt"\n', True, "skip middle optional key"),
    Case("optional", 'label: "other"\n', False, "const"),
    Case(
        "free",
        'meta:\n  any_key:\n    - 1\n    - deep: null\n  "k 2": "v"\nany:\n  - true\n  - 2.5\n  - "s"\n',
        True,
        "schema-free mapping (plain and quoted keys) and value",
    ),
    Case("free", 'meta: {"a": [1, {"b": null}]}\n', True, "flow style inside a schema-free value"),
    Case("free", "meta: {}\n", True, "empty free mapping"),
    Case("free", "meta:\n  on: 1\n", False, "plain key that loads as a boolean"),
    Case("free", "meta: []\n", False, "sequence for mapping"),
    Case("bounded_map", "{}\n", True, "no entries"),
    Case("bounded_map", 'a: 1\n"b b": 2\n', True, "maxProperties entries"),
    Case("bounded_map", "a: 1\nb: 2\nc: 3\n", False, "one entry past maxProperties"),
    Case("bounded_map", "a: {}\n", False, "value of the wrong type"),
    Case("top_array", '- "a"\n- 1\n', True, "root sequence of mixed enum scalars"),
    Case("top_array", "- true\n", True, "boolean enum value"),
    Case("top_array", "[]\n", False, "minItems"),
    Case("top_array", '- "b"\n', False, "not in enum"),
    Case("mixed", '- origin: "a"\n  dest: "b"\n  pkg:\n    w: 1\n', True, "closed alternative"),
    Case("mixed", '- origin: "a"\n  dest: "b"\n', True, "prefix of the closed alternative, schema-free match"),
    Case("mixed", '- x:\n    - 1\n    - y: null\n- "s"\n- {}\n', True, "schema-free and string alternatives"),
    Case("mixed", "- 1\n", False, "no alternative"),
    Case("short", 'code: "ab"\n', True, "minLength"),
    Case("short", 'code: "\u00e9\U0001f600x"\n', True, "length in code points"),
    Case("short", 'code: "abcd"\n', False, "too long"),
]
