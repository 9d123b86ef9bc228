"""grammars/*.gbnf: still what the generators produce, parsed by llama.cpp, llguidance and xgrammar, right verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rig.decoding import json_schema_to_gbnf, yaml_schema_to_gbnf
from rig.decoding.yaml_gbnf import yaml_dump

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"
TOOL_CALL = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
    "required": ["name", "arguments"],
}
GENERATED = {
    "json.gbnf": lambda: json_schema_to_gbnf(True, any_depth=None),
    "yaml_subset.gbnf": lambda: yaml_schema_to_gbnf(True),
    "tool_call.gbnf": lambda: json_schema_to_gbnf(TOOL_CALL),
}
DEEP = {"a": [1, {"b": [True, None, {"c": '\u00e9"\\'}]}], "": {}, "on": []}
SAMPLES = {
    "json.gbnf": [
        (json.dumps(DEEP), True),
        (json.dumps(DEEP, indent=2), True),
        ("[[[[[[[[[[1]]]]]]]]]]", True),
        ('"x"', True),
        ("-0.5e+3", True),
        ("1" * 20, True),
        ("1" * 21, False),
        ("0." + "1" * 21, False),
        ("1e1234", False),
        ("{'a': 1}", False),
        ("[1,]", False),
        ("tru", False),
        ("", False),
    ],
    "yaml_subset.gbnf": [
        (yaml_dump(DEEP), True),
        ('- 1\n- {"a": [2.5, null]}\n', True),
        ('"s"\n', True),
        ("- " + "1" * 21 + "\n", False),
        ("a: 1\n  b: 2\n", False),
        ("a: yes\n", False),
        ("on: 1\n", False),
        ("a: 1", False),
    ],
    "tool_call.gbnf": [
        ('{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}', True),
        ('{"name": "f", "arguments": {}}', True),
        ('{"arguments": {}, "name": "f"}', False),
        ('{"name": "f", "arguments": []}', False),
        ('{"name": "f"}', False),
    ],
}


def _body(name: str) -> str:
    text = (GRAMMARS / name).read_text()
    head = [line for line in text.splitlines() if line.startswith("#")]
    assert head and any("Generated:" in h for h in head), f"{name} needs a comment header"
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_static_file_matches_generator(name: str) -> None:
    assert _body(name) == GENERATED[name](), f"regenerate grammars/{name} (see its Generated: line)"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_static_file_verdicts(name: str, engines) -> None:  # type: ignore[no-untyped-def]
    gbnf = (GRAMMARS / name).read_text()  # with its comment header, as an engine reads the file
    for text, ok in SAMPLES[name]:
        verdicts = engines(gbnf, _lark_of(gbnf), text)
        assert set(verdicts.values()) == {ok}, (name, text, verdicts)
        if ok:  # accepted documents load
            yaml.safe_load(text) if name.startswith("yaml") else json.loads(text)


def _lark_of(gbnf: str) -> str:
    """Through llguidance's GBNF importer (only consulted when llguidance is installed)."""
    try:
        from llguidance.gbnf_to_lark import gbnf_to_lark
    except ImportError:
        return ""
    return gbnf_to_lark(gbnf)


def test_static_files_parse_in_llama_cpp(llama_matcher) -> None:  # type: ignore[no-untyped-def]
    from llama_cpp import LlamaGrammar

    for path in sorted(GRAMMARS.glob("*.gbnf")):
        text = path.read_text()
        assert llama_matcher.loads(text), path.name
        LlamaGrammar.from_file(str(path), verbose=False)  # the file-based entry point engines may use
