"""The public surface: to_gbnf / to_lark per constraint kind, parse_output, schema handling, lazy imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from rig.decoding import (
    Constraint,
    SchemaError,
    UnsupportedSchema,
    json_schema_to_gbnf,
    json_schema_to_lark,
    parse_output,
    to_gbnf,
    to_lark,
    validate,
    yaml_schema_to_gbnf,
    yaml_schema_to_lark,
)
from tests.decoding.cases import NESTED, PERSON

ANSWER = {
    "type": "object",
    "properties": {
        "API": {"type": "array", "items": {"enum": ["a", "b"]}},
        "parameters": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["API", "parameters"],
    "additionalProperties": False,
}


def test_to_gbnf_and_to_lark_dispatch_on_kind() -> None:
    j = Constraint(kind="json_schema", schema_=ANSWER)
    y = Constraint(kind="yaml_schema", schema_=ANSWER)
    assert to_gbnf(j) == json_schema_to_gbnf(ANSWER)
    assert to_gbnf(y) == yaml_schema_to_gbnf(ANSWER)
    assert to_lark(j) == json_schema_to_lark(ANSWER)
    assert to_gbnf(j) is to_gbnf(Constraint(kind="json_schema", schema_=ANSWER))  # cached per schema
    raw = 'root ::= "x" [0-9]'
    assert to_gbnf(Constraint(kind="grammar", grammar=raw)) == raw
    lark = "start: /[0-9]+/"
    assert to_lark(Constraint(kind="grammar", grammar=lark)) == lark


def test_key_order_in_the_schema_is_kept() -> None:
    a = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["y", "x"]}
    b = {"type": "object", "properties": {"y": {"type": "integer"}, "x": {"type": "integer"}}, "required": ["y", "x"]}
    ga, gb = to_gbnf(Constraint(kind="json_schema", schema_=a)), to_gbnf(Constraint(kind="json_schema", schema_=b))
    assert ga.index('"\\"x\\""') < ga.index('"\\"y\\""') and gb.index('"\\"y\\""') < gb.index('"\\"x\\""')


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (r"^\d{3}-[A-Z]+(x|y)?$", ["123-AB", "000-Zy"], ["12-AB", "123-ab", "123-ABz", "123-"]),
        (r"[a-c]{2,3}\.(?:txt|md)", ["ab.txt", "abc.md"], ["a.txt", "abcd.md", "ab.doc", "abXtxt"]),
        (r"(?P<sign>[-+])?\d+(\.\d*)?", ["+1.", "-12.50", "7"], ["+", ".5", "1.2.3"]),
        (r"[^\s,]+(, [^\s,]+)*", ["a, b, c", "\u00e9t\u00e9"], ["a,b", "a, ", " a"]),
        (r"yes|no|\x41\u00e9\*", ["yes", "no", "A\u00e9*"], ["maybe", "A\u00e9"]),
    ],
)
def test_regex_translation(pattern: str, good: list[str], bad: list[str], engines) -> None:  # type: ignore[no-untyped-def]
    import re

    c = Constraint(kind="regex", pattern=pattern)
    gbnf, lark = to_gbnf(c), to_lark(c)
    for text in good + bad:
        expected = re.fullmatch(pattern, text) is not None
        assert expected == (text in good), text  # the table agrees with Python's re
        verdicts = engines(gbnf, lark, text)
        assert set(verdicts.values()) == {expected}, (pattern, text, verdicts, gbnf)


@pytest.mark.parametrize("pattern", [r"(a)\1", r"a(?=b)", r"(?i)abc", r"\bword", r"a^b", r"a++", r"[[:alpha:]]"])
def test_unsupported_regex_says_what(pattern: str) -> None:
    with pytest.raises(NotImplementedError, match="cannot be translated"):
        to_gbnf(Constraint(kind="regex", pattern=pattern))


def test_choice(engines) -> None:  # type: ignore[no-untyped-def]
    c = Constraint(kind="choice", choices=["yes", "no", 'say "hi"\n', "n\u00e9e"])
    gbnf, lark = to_gbnf(c), to_lark(c)
    for text, ok in [("yes", True), ('say "hi"\n', True), ("n\u00e9e", True), ("ye", False), ("yes ", False)]:
        assert set(engines(gbnf, lark, text).values()) == {ok}, text


def test_parse_output() -> None:
    j = Constraint(kind="json_schema", schema_=PERSON)
    y = Constraint(kind="yaml_schema", schema_=PERSON)
    assert parse_output('{"name": "a", "mode": "fast"}', j) == ({"name": "a", "mode": "fast"}, None)
    assert parse_output('name: "a"\nmode: "fast"\n', y) == ({"name": "a", "mode": "fast"}, None)
    value, err = parse_output('{"name": "a"', j)
    assert value is None and err and err.startswith("invalid JSON")
    value, err = parse_output('{"mode": "medium"}', j)
    assert value is None and "missing required key 'name'" in err and "not one of" in err  # type: ignore[operator]
    value, err = parse_output("name: [unclosed\n", y)
    assert value is None and err and err.startswith("invalid YAML")
    # safe_load only: python tags are refused rather than executed
    value, err = parse_output("name: !!python/object/apply:os.getcwd []\nmode: fast\n", y)
    assert value is None and err and "invalid YAML" in err
    # YAML 1.1 booleans are not strings
    assert (
        parse_output('name: "a"\nmode: "fast"\nnote: no\n', y)[1]
        == "schema: $.note: expected string or null, got boolean"
    )
    assert parse_output("abc", Constraint(kind="regex", pattern="[a-c]+")) == ("abc", None)
    assert parse_output("abd", Constraint(kind="regex", pattern="[a-c]+"))[0] is None
    assert parse_output("no", Constraint(kind="choice", choices=["yes", "no"])) == ("no", None)
    assert parse_output("x", Constraint(kind="choice", choices=["yes", "no"]))[0] is None
    assert parse_output("anything", Constraint(kind="grammar", grammar='root ::= "a"')) == ("anything", None)


@pytest.mark.parametrize("pattern", ["[A-Z]{3}", "^[A-Z]{3}", r"^\d{3}$", "^a.c$", "^[^a]$", "^[0-z]$"])
def test_strict_refuses_unenforceable_keywords(pattern: str) -> None:
    """A pattern is a search, and a grammar writes only a plain anchored one exactly (``schema.plain_pattern``): an
    unanchored one, an escape, ``.``, a negated class or a range across kinds is refused in strict mode."""
    s = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}
    with pytest.raises(UnsupportedSchema, match="pattern"):
        json_schema_to_gbnf(s)
    assert "code" in json_schema_to_gbnf(s, strict=False)
    plain = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$", "maxLength": 3}}}
    with pytest.raises(UnsupportedSchema, match="pattern"):  # a length bound beside it is not the pattern's
        json_schema_to_gbnf(plain)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_a_plain_anchored_pattern_is_enforced(fmt: str, engines) -> None:  # type: ignore[no-untyped-def]
    s = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,3}$"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    to_g, to_l = (
        (json_schema_to_gbnf, json_schema_to_lark) if fmt == "json" else (yaml_schema_to_gbnf, yaml_schema_to_lark)
    )
    gbnf, lark = to_g(s), to_l(s)

    def doc(name: str) -> str:
        return json.dumps({"name": name}) if fmt == "json" else f'name: "{name}"\n'

    for name in ("a", "_x1", "getX"):
        assert validate({"name": name}, s) == [] and all(engines(gbnf, lark, doc(name)).values()), name
    for name in ("", "1a", "getXY", "a b", "a-b", "]['a'"):
        assert validate({"name": name}, s) and not any(engines(gbnf, lark, doc(name)).values()), name


def test_refs_defs_allof_and_type_lists(engines) -> None:  # type: ignore[no-untyped-def]
    s = {
        "$defs": {
            "pt": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            }
        },
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/pt"},
            "b": {"allOf": [{"$ref": "#/$defs/pt"}, {"description": "d"}]},
            "c": {"type": ["integer", "null"]},
            "d": {"const": 3},
            "e": {"enum": [1, "1", True], "type": "string"},
        },
        "required": ["a", "b", "c", "d", "e"],
    }
    gbnf, lark = json_schema_to_gbnf(s), json_schema_to_lark(s)
    ok = '{"a": {"x": 1, "y": 2.5}, "b": {"x": 0, "y": -1}, "c": null, "d": 3, "e": "1"}'
    bad = [
        '{"a": {"x": 1}, "b": {"x": 0, "y": -1}, "c": null, "d": 3, "e": "1"}',
        '{"a": {"x": 1, "y": 2}, "b": {"x": 0, "y": -1}, "c": 1.5, "d": 3, "e": "1"}',
        '{"a": {"x": 1, "y": 2}, "b": {"x": 0, "y": -1}, "c": 1, "d": 3, "e": 1}',
    ]
    assert all(engines(gbnf, lark, ok).values())
    for text in bad:
        assert not any(engines(gbnf, lark, text).values()), text


def test_recursive_ref_json_works_yaml_refuses(engines) -> None:  # type: ignore[no-untyped-def]
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "required": ["v"],
            }
        },
        "$ref": "#/$defs/node",
    }
    gbnf, lark = json_schema_to_gbnf(tree), json_schema_to_lark(tree)
    assert all(engines(gbnf, lark, '{"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]}').values())
    assert not any(engines(gbnf, lark, '{"v": 1, "kids": [{"kids": []}]}').values())
    with pytest.raises(SchemaError, match="recursive"):
        yaml_schema_to_gbnf(tree)


@pytest.mark.parametrize(
    "schema",
    [
        False,
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        {"enum": [1], "type": "string"},
        {"type": "array", "minItems": 3, "maxItems": 2},
        {"type": "object", "required": ["z"], "additionalProperties": False},
        {"$ref": "#/$defs/missing"},
        {"type": "strange"},
    ],
)
def test_unsatisfiable_or_malformed_schemas(schema: object) -> None:
    with pytest.raises(SchemaError):
        json_schema_to_gbnf(schema)  # type: ignore[arg-type]


def test_no_engine_imported_at_import_time() -> None:
    code = (
        "import sys, rig.decoding as d; d.to_gbnf(d.Constraint(kind='json_schema', schema_={'type': 'object'})); "
        "print(sorted(m for m in ('llama_cpp', 'llguidance', 'yaml', 'jsonschema') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.replace("'", '"')) == []


def test_nested_grammar_names_are_valid_identifiers() -> None:
    import re

    for line in json_schema_to_gbnf(NESTED).splitlines():
        assert re.match(r"[a-z][a-z0-9-]* ::= ", line), line
    for line in json_schema_to_lark(NESTED).splitlines():
        assert re.match(r"([a-z_][a-z0-9_]*|[A-Z_][A-Z0-9_]*): ", line), line


def test_schema_free_nesting_is_bounded(engines) -> None:  # type: ignore[no-untyped-def]
    from rig.decoding import yaml_schema_to_lark
    from rig.decoding.yaml_gbnf import yaml_dump

    s = {"type": "object", "properties": {"v": {}}, "required": ["v"]}
    two, three = {"v": [[1]]}, {"v": [[[1]]]}
    for fmt in ("json", "yaml"):
        if fmt == "json":
            gbnf, lark, dump = json_schema_to_gbnf(s, any_depth=2), json_schema_to_lark(s, any_depth=2), json.dumps
        else:
            gbnf, lark, dump = yaml_schema_to_gbnf(s, any_depth=2), yaml_schema_to_lark(s, any_depth=2), yaml_dump
        assert all(engines(gbnf, lark, dump(two)).values()), fmt
        assert not any(engines(gbnf, lark, dump(three)).values()), fmt
    unbounded = json_schema_to_gbnf(s, any_depth=None)
    assert all(engines(unbounded, json_schema_to_lark(s, any_depth=None), json.dumps({"v": [[[[[[1]]]]]]})).values())


# A \xNN escape followed by a raw hex digit: llama.cpp reads two digits, xgrammar (vLLM) reads them all.
_AMBIGUOUS_HEX = re.compile(r"(?<!\\)(?:\\\\)*\\x[0-9a-fA-F]{2}[0-9a-fA-F]")


@pytest.mark.parametrize(
    "constraint",
    [
        Constraint(kind="json_schema", schema_=PERSON),
        Constraint(kind="yaml_schema", schema_=NESTED),
        Constraint(kind="choice", choices=["\x01a", "-9", "/b"]),
        Constraint(kind="regex", pattern=r"[/b\-0-9]+\x2fa"),
    ],
    ids=["json", "yaml", "choice", "regex"],
)
def test_gbnf_hex_escapes_read_the_same_in_every_engine(constraint: Constraint) -> None:
    gbnf = to_gbnf(constraint)
    assert "\\x" in gbnf  # the case is exercised
    assert not _AMBIGUOUS_HEX.search(gbnf), _AMBIGUOUS_HEX.search(gbnf)
