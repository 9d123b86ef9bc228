"""Hand-written documents against every installed grammar engine, for JSON and YAML grammars."""

from __future__ import annotations

import json

import pytest

from rig.decoding import json_schema_to_gbnf, json_schema_to_lark, validate, yaml_schema_to_gbnf, yaml_schema_to_lark
from rig.decoding.safe import load_yaml
from tests.decoding.cases import JSON_CASES, SCHEMAS, YAML_CASES, Case


def _grammars(fmt: str, name: str) -> tuple[str, str]:
    s = SCHEMAS[name]
    if fmt == "json":
        return json_schema_to_gbnf(s), json_schema_to_lark(s)
    return yaml_schema_to_gbnf(s), yaml_schema_to_lark(s)


def _load(fmt: str, text: str) -> object:
    """As rig reads a reply: a YAML one through its bounded loader (which keeps what PyYAML would fold)."""
    if fmt == "json":
        return json.loads(text)
    value, err = load_yaml(text)
    assert err is None, err
    return value


@pytest.mark.parametrize("case", JSON_CASES, ids=lambda c: f"{c.schema_name}-{c.why}")
def test_json_case(case: Case, engines) -> None:  # type: ignore[no-untyped-def]
    _check("json", case, engines)


@pytest.mark.parametrize("case", YAML_CASES, ids=lambda c: f"{c.schema_name}-{c.why}")
def test_yaml_case(case: Case, engines) -> None:  # type: ignore[no-untyped-def]
    _check("yaml", case, engines)


def _check(fmt: str, case: Case, engines) -> None:  # type: ignore[no-untyped-def]
    gbnf, lark = _grammars(fmt, case.schema_name)
    verdicts = engines(gbnf, lark, case.text)
    assert set(verdicts.values()) == {case.accept}, (case.why, verdicts)
    # The table itself must be right: accepted (and deliberately rejected valid) documents validate.
    if case.accept or case.valid_but_rejected:
        assert validate(_load(fmt, case.text), SCHEMAS[case.schema_name]) == [], case.why
