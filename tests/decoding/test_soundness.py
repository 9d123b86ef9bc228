"""Randomised checks: random valid instances are accepted; anything an engine accepts loads and validates."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from rig.decoding import json_schema_to_gbnf, json_schema_to_lark, validate, yaml_schema_to_gbnf, yaml_schema_to_lark
from rig.decoding.yaml_gbnf import yaml_dump
from tests.decoding.cases import SCHEMAS
from tests.decoding.sampling import mutate, sample

INSTANCES = 6
MUTATIONS = 12


def _render(fmt: str, value: object, rng: random.Random) -> str:
    if fmt == "yaml":
        return yaml_dump(value)
    return json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2]))


def _load(fmt: str, text: str) -> object:
    return json.loads(text) if fmt == "json" else yaml.safe_load(text)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_random_instances_and_mutations(fmt: str, name: str, engines) -> None:  # type: ignore[no-untyped-def]
    schema = SCHEMAS[name]
    gbnf = (json_schema_to_gbnf if fmt == "json" else yaml_schema_to_gbnf)(schema)
    lark = (json_schema_to_lark if fmt == "json" else yaml_schema_to_lark)(schema)
    rng = random.Random(f"{fmt}-{name}")
    accepted_mutants = 0
    for _ in range(INSTANCES):
        value = sample(schema, rng)
        text = _render(fmt, value, rng)
        assert validate(_load(fmt, text), schema) == [], text
        verdicts = engines(gbnf, lark, text)
        assert all(verdicts.values()), (text, verdicts)
        for _ in range(MUTATIONS):
            bad = mutate(text, rng)
            verdicts = engines(gbnf, lark, bad)
            assert len(set(verdicts.values())) == 1, (bad, verdicts)  # engines agree
            if any(verdicts.values()):
                accepted_mutants += 1
                assert validate(_load(fmt, bad), schema) == [], (bad, verdicts)
    assert accepted_mutants < INSTANCES * MUTATIONS  # the grammar is not vacuous
