"""Generated grammars drive real constrained generation in llama.cpp (embedded Gemma 3 270M, CPU).

llama.cpp parses a grammar only when sampling starts, so this is the end-to-end check that our GBNF is
usable there; the assertion is on the output (parses, validates), not on its content. Schemas bound
string lengths so a small model finishes inside the token budget.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rig.decoding import Constraint, parse_output, to_gbnf

pytestmark = pytest.mark.model

ROUTE = {
    "type": "object",
    "properties": {
        "API": {
            "type": "array",
            "items": {"enum": ["getWeather", "getTime", "sendEmail"]},
            "minItems": 1,
            "maxItems": 1,
        },
        "parameters": {
            "type": "array",
            "minItems": 1,
            "maxItems": 1,
            "items": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"city": {"type": "string", "maxLength": 16}},
                        "required": ["city"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"zone": {"type": "string", "maxLength": 16}},
                        "required": ["zone"],
                        "additionalProperties": False,
                    },
                ]
            },
        },
    },
    "required": ["API", "parameters"],
    "additionalProperties": False,
}
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
    },
    "required": ["name", "age", "tags"],
}
QUESTION = {
    "route": "Tools: getWeather(city), getTime(zone), sendEmail(to). Which tool and arguments answer: "
    "what is the weather in Paris?",
    "person": "Write a record for Ann, who is 41.",
}


@pytest.fixture(scope="module")
def llm(embedded_weights: str) -> Iterator[object]:
    from llama_cpp import Llama

    m = Llama(model_path=embedded_weights, n_ctx=512, seed=0, verbose=False)
    yield m
    m.close()


@pytest.mark.parametrize("kind", ["json_schema", "yaml_schema"])
@pytest.mark.parametrize("name", ["route", "person"])
def test_constrained_generation_parses_and_validates(llm, name: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    from llama_cpp import LlamaGrammar

    c = Constraint(kind=kind, schema_=ROUTE if name == "route" else PERSON)  # type: ignore[arg-type]
    fmt = "JSON" if kind == "json_schema" else "YAML"
    prompt = f"<start_of_turn>user\n{QUESTION[name]} Answer in {fmt}.<end_of_turn>\n<start_of_turn>model\n"
    out = llm.create_completion(
        prompt, grammar=LlamaGrammar.from_string(to_gbnf(c), verbose=False), max_tokens=64, temperature=0
    )
    choice = out["choices"][0]
    _, err = parse_output(choice["text"], c)
    assert err is None, (choice["text"], choice["finish_reason"], err)
    assert choice["finish_reason"] == "stop"
