"""CallNavi answer schemas (real API lists) against real ground-truth answers, in JSON and YAML.

Variant "names": the benchmark's answer shape (API names as an enum, parameters as free objects).
Variant "per_api": parameters items are anyOf the APIs' own parameter objects (closed, declared keys);
"typed": the same from APISchema (types, nested objects).
The grammar must accept a ground-truth answer exactly when it validates (after putting keys in the
declared order, which the grammar fixes).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rig.decoding import json_schema_to_gbnf, json_schema_to_lark, validate, yaml_schema_to_gbnf, yaml_schema_to_lark
from rig.decoding.yaml_gbnf import yaml_dump
from tests.decoding.conftest import CALLNAVI, callnavi_apis, callnavi_schemas

DOMAINS = [
    "aviation",
    "bank",
    "gov",
    "hospital",
    "hotel",
    "hr",
    "insurance",
    "logistics",
    "shopping",
    "telecommunications",
]


def names_schema(domain: str) -> dict:
    names = list(dict.fromkeys(a["name"] for a in callnavi_apis(domain)))
    return {
        "type": "object",
        "properties": {
            "API": {"type": "array", "items": {"type": "string", "enum": names}},
            "parameters": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["API", "parameters"],
        "additionalProperties": False,
    }


def per_api_params(domain: str, typed: bool = False) -> dict[str, dict]:
    """API name -> schema of its parameters object.

    Default: from APIs/<domain>.json, the declared keys (all required, any values, nothing else).
    typed: from APISchema/<domain>.json (JSON-schema types, nested objects), closed; an API without
    properties there (all of telecommunications) gets a free object.
    """
    out = {}
    if not typed:
        for api in callnavi_apis(domain):
            keys = list(api["parameters"])  # a dict of name -> type hint, or (telecommunications) a list of names
            out[api["name"]] = {
                "type": "object",
                "properties": {k: {} for k in keys},
                "required": keys,
                "additionalProperties": False,
            }
        return out
    for api in callnavi_schemas(domain):
        p = {k: v for k, v in api["parameters"].items() if k != "$schema"}
        out[api["name"]] = {**p, "additionalProperties": False} if p.get("properties") else {"type": "object"}
    return out


def per_api_schema(domain: str, only: set[str] | None = None, typed: bool = False) -> dict:
    s = names_schema(domain)
    params = {k: v for k, v in per_api_params(domain, typed).items() if only is None or k in only}
    s["properties"]["parameters"]["items"] = {"anyOf": list(params.values())}
    return s


def reorder(value: Any, schema: dict) -> Any:
    """Keys in the schema's declared order (the grammar fixes it); undeclared keys keep their place at the end."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(value, dict) or not props:
        return value
    first = [k for k in props if k in value]
    return {k: reorder(value[k], props.get(k, {})) for k in first + [k for k in value if k not in props]}


def ground_truth(domain: str) -> list[dict]:
    path = CALLNAVI / "Questions" / f"{domain}.json"
    return [q["ground_truth"] for q in json.loads(path.read_text())]


@pytest.mark.parametrize("domain", DOMAINS)
def test_grammars_load_in_every_engine(domain: str, engines) -> None:  # type: ignore[no-untyped-def]
    for schema in (names_schema(domain), per_api_schema(domain), per_api_schema(domain, typed=True)):
        for gbnf, lark in (
            (json_schema_to_gbnf(schema), json_schema_to_lark(schema)),
            (yaml_schema_to_gbnf(schema), yaml_schema_to_lark(schema)),
        ):
            verdicts = engines(gbnf, lark, "")  # compiles the grammars; an empty document is never an answer
            assert not any(verdicts.values()), verdicts


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize(
    ("domain", "variant"),
    [
        ("telecommunications", "names"),
        ("telecommunications", "per_api"),
        ("logistics", "per_api"),
        ("logistics", "typed"),
    ],
)
def test_ground_truth_accepted_iff_valid(domain: str, variant: str, fmt: str, engines) -> None:  # type: ignore[no-untyped-def]
    typed = variant == "typed"
    schema = names_schema(domain) if variant == "names" else per_api_schema(domain, typed=typed)
    params = per_api_params(domain, typed)
    if fmt == "json":
        gbnf, lark = json_schema_to_gbnf(schema), json_schema_to_lark(schema)
    else:
        gbnf, lark = yaml_schema_to_gbnf(schema), yaml_schema_to_lark(schema)
    counts = {True: 0, False: 0}
    for gt in ground_truth(domain):
        if variant != "names":
            gt = {
                **gt,
                "parameters": [
                    reorder(p, params.get(name, {})) for name, p in zip(gt["API"], gt["parameters"], strict=False)
                ]
                + gt["parameters"][len(gt["API"]) :],
            }
        valid = validate(gt, schema) == []
        text = json.dumps(gt) if fmt == "json" else yaml_dump(gt)
        verdicts = engines(gbnf, lark, text)
        assert set(verdicts.values()) == {valid}, (text, verdicts, validate(gt, schema))
        counts[valid] += 1
    assert counts[True] > 0


def test_bad_answers_rejected(engines) -> None:  # type: ignore[no-untyped-def]
    schema = per_api_schema("telecommunications", {"getNameFromNumber", "getBillForNumber"})
    good = {"API": ["getNameFromNumber"], "parameters": [{"phoneNumber": "123-456-7890"}]}
    assert validate(good, schema) == []
    bad = [
        {"API": ["getNameFromPhone"], "parameters": [{"phoneNumber": "1"}]},  # not an API name
        {"API": ["getNameFromNumber"], "parameters": [{"phone": "1"}]},  # undeclared parameter
        {"API": ["getNameFromNumber"], "parameters": [{}]},  # missing required parameter
        {"API": ["getNameFromNumber"]},  # missing key
        {"API": ["getNameFromNumber"], "parameters": [{"phoneNumber": "1", "x": 2}]},  # extra parameter
    ]
    for fmt, to_gbnf, to_lark, dump in (
        ("json", json_schema_to_gbnf, json_schema_to_lark, json.dumps),
        ("yaml", yaml_schema_to_gbnf, yaml_schema_to_lark, yaml_dump),
    ):
        gbnf, lark = to_gbnf(schema), to_lark(schema)
        assert all(engines(gbnf, lark, dump(good)).values()), fmt
        for value in bad:
            assert validate(value, schema), value
            assert not any(engines(gbnf, lark, dump(value)).values()), (fmt, value)


def test_benchmark_schema_ties_parameters_to_apis(engines) -> None:  # type: ignore[no-untyped-def]
    """The benchmark's own answer schema: one argument object per API, or none; never more (a model looping on
    argument objects must be stopped by the grammar, not by max_tokens)."""
    from rig.benchmarks.callnavi.data import Api
    from rig.benchmarks.callnavi.prompts import answer_schema

    apis = [Api(**a) for a in callnavi_apis("telecommunications")]
    schema = answer_schema(apis, "params")
    call = {"accountId": "A1"}
    good = [
        {"API": ["getBillingAddress"], "parameters": [call]},
        {"API": ["getBillingAddress"], "parameters": []},
        {"API": ["getNameFromNumber", "getBillingAddress"], "parameters": [{"phoneNumber": "1"}, call]},
    ]
    bad = [
        {"API": ["getBillingAddress"], "parameters": [call, call]},
        {"API": ["getNameFromNumber", "getBillingAddress"], "parameters": [{"phoneNumber": "1"}]},
        {"API": ["getBillingAddress"] * 7, "parameters": [call] * 7},
    ]
    for fmt, to_gbnf, to_lark, dump in (
        ("json", json_schema_to_gbnf, json_schema_to_lark, json.dumps),
        ("yaml", yaml_schema_to_gbnf, yaml_schema_to_lark, yaml_dump),
    ):
        gbnf, lark = to_gbnf(schema), to_lark(schema)
        for value in good:
            assert validate(value, schema) == [], value
            assert all(engines(gbnf, lark, dump(value)).values()), (fmt, value)
        for value in bad:
            assert validate(value, schema), value
            assert not any(engines(gbnf, lark, dump(value)).values()), (fmt, value)
