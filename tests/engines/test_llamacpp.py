"""The llama.cpp engine against the real embedded Gemma 3 270M on CPU."""

import asyncio
import json
from pathlib import Path

import pytest

from rig.decoding.constraint import Constraint
from rig.engines.base import EngineError
from rig.engines.llamacpp import physical_cores
from rig.records import ChatRequest, Message, Sampling

pytestmark = pytest.mark.model


def chat(engine, text: str, **kw):  # type: ignore[no-untyped-def]
    sampling = Sampling(**{"max_tokens": 48, **kw.pop("sampling", {})})
    return asyncio.run(engine.chat(ChatRequest(messages=[Message(role="user", content=text)], sampling=sampling, **kw)))


def test_token_counts_and_timings_consistent(gemma_engine) -> None:  # type: ignore[no-untyped-def]
    for q in ("Name three rivers in Finland.", "Write one sentence about maps."):
        g = chat(gemma_engine, q)
        assert g.error is None and g.text
        assert g.prompt_tokens and g.prompt_tokens > len(q.split())
        # completion tokens are the generated ids; re-tokenising the text must give the same count
        assert g.completion_tokens == gemma_engine.count_tokens(g.text)
        assert 0 < g.timings.ttft_s < g.timings.e2e_s
        assert g.timings.decode_tps and g.timings.decode_tps > 0
        # decode speed agrees with the wall clock after the first token
        implied = (g.completion_tokens - 1) / (g.timings.e2e_s - g.timings.ttft_s)
        assert 0.5 < g.timings.decode_tps / implied < 2.0


def test_max_tokens_and_determinism(gemma_engine) -> None:  # type: ignore[no-untyped-def]
    a = chat(gemma_engine, "Count from one to one hundred in words.", sampling={"max_tokens": 12})
    b = chat(gemma_engine, "Count from one to one hundred in words.", sampling={"max_tokens": 12})
    assert a.completion_tokens == 12 and a.finish_reason == "length"
    assert a.text == b.text  # greedy decoding, same prompt (second call is served from the prefix cache)


def test_prompt_longer_than_context_is_a_recorded_error(gemma_engine) -> None:  # type: ignore[no-untyped-def]
    g = chat(gemma_engine, "word " * 9000)
    assert g.error and "context_length" in g.error and g.prompt_tokens > 8192


SCHEMA = {
    "type": "object",
    "properties": {
        "API": {"type": "array", "items": {"type": "string", "enum": ["getWeather", "getRoute"]}, "maxItems": 3},
        "parameters": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 32},
                    "origin": {"type": "string", "maxLength": 32},
                },
                "additionalProperties": False,
            },
        },
    },
    "required": ["API", "parameters"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "question", ["What is the weather in Helsinki tomorrow?", "Route me from Kamppi to Pasila.", "Tell me a joke."]
)
def test_json_schema_constrained_output_parses(gemma_engine, question: str) -> None:  # type: ignore[no-untyped-def]
    c = Constraint(kind="json_schema", schema_=SCHEMA)
    g = chat(
        gemma_engine,
        f"Answer in JSON with keys API and parameters. {question}",
        constraint=c,
        sampling={"max_tokens": 200},
    )
    assert g.error is None, g.error
    value = json.loads(g.text)
    assert set(value) == {"API", "parameters"}
    assert all(a in ("getWeather", "getRoute") for a in value["API"])


def test_not_a_gguf_is_a_clear_engine_error(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from rig.engines import create_engine
    from rig.registry import ModelSpec, Weights

    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a model")
    spec = ModelSpec(
        name="b", base="b", engine="llamacpp", weights=Weights(file=str(bad)), quantization="q4", context_length=512
    )
    with pytest.raises(EngineError, match="could not load"):
        asyncio.run(create_engine(spec, str(bad)).load())


def test_unknown_engine_arg_rejected() -> None:
    pytest.importorskip("llama_cpp")  # create_engine refuses an engine whose backend is missing
    from rig.engines import create_engine
    from rig.registry import ModelSpec, Weights

    spec = ModelSpec(
        name="b",
        base="b",
        engine="llamacpp",
        weights=Weights(file="x"),
        quantization="q4",
        context_length=512,
        engine_args={"n_gpu_layer": 3},
    )
    with pytest.raises(EngineError, match="n_gpu_layer"):
        create_engine(spec, "x")


@pytest.mark.model
def test_template_probe_folds_what_the_gemma_format_would_drop(gemma_engine) -> None:  # type: ignore[no-untyped-def]
    """llama-cpp-python's gemma format drops system and tool messages; the engine must fold them into user turns."""
    from rig.records import ChatRequest, Message

    t = gemma_engine.template
    assert gemma_engine.describe()["template"] == t
    assert gemma_engine.describe()["threads"]["decode"] == physical_cores()  # no n_threads in the entry
    req = ChatRequest(
        messages=[
            Message(role="system", content="SYSTEM-RULES"),
            Message(role="user", content="Q1"),
            Message(role="assistant", content="A1"),
            Message(role="tool", name="route", content="RESULT-42"),
            Message(role="user", content="Q2"),
        ]
    )
    prompt, _, _ = gemma_engine.render(req)
    assert "SYSTEM-RULES" in prompt and "RESULT-42" in prompt
    assert prompt.index("SYSTEM-RULES") < prompt.index("Q1") < prompt.index("A1") < prompt.index("RESULT-42")
    assert gemma_engine.capabilities.native_tools is t["tools"]


def test_grammar_llama_cpp_cannot_parse_is_a_recorded_error(gemma_engine) -> None:  # type: ignore[no-untyped-def]
    """llama-cpp-python accepts any grammar string and fails only when sampling (its server segfaults)."""
    g = chat(gemma_engine, "Say a.", constraint=Constraint(kind="grammar", grammar="root ::= undefined-rule"))
    assert g.error and "could not parse the grammar" in g.error and g.text == ""
    ok = chat(gemma_engine, "Say a.", constraint=Constraint(kind="grammar", grammar='root ::= "a" | "b"'))
    assert ok.error is None and ok.text in ("a", "b")


def test_physical_cores_counts_sibling_threads_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for cpu, siblings in {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3", 4: "4"}.items():
        (tmp_path / f"cpu{cpu}/topology").mkdir(parents=True)
        (tmp_path / f"cpu{cpu}/topology/thread_siblings_list").write_text(siblings + "\n")
    assert physical_cores({0, 1, 2, 3, 4}, tmp_path) == 3
    assert physical_cores({0, 2}, tmp_path) == 1  # two hardware threads of one core
    assert physical_cores({0, 1}, tmp_path) == 2
    assert physical_cores({7, 8}, tmp_path) == 2  # no topology: each CPU counts
