"""Outlines as the llama.cpp engine's opt-in constraint backend, and the vocabulary audit behind it.

Model tests load the embedded Gemma 3 270M on CPU once (module fixture) and keep generations short.
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from rig.benchmarks.callnavi.benchmark import MAX_TOKENS as CALLNAVI_CAPS
from rig.decoding import Constraint, parse_output
from rig.engines.base import EngineError
from rig.records import ChatRequest, Message, Sampling, ToolSpec
from rig.registry import ModelSpec, Weights, load_registry

REPO = Path(__file__).resolve().parents[2]
HAS_OUTLINES = all(importlib.util.find_spec(m) is not None for m in ("outlines", "llguidance"))
needs_outlines = pytest.mark.skipif(
    not HAS_OUTLINES, reason="outlines and llguidance not installed (pip install 'rig[outlines]')"
)


def _spec(**engine_args: Any) -> ModelSpec:
    return ModelSpec(
        name="tiny",
        base="tiny",
        engine="llamacpp",
        weights=Weights(file="x.gguf"),
        quantization="q4",
        context_length=512,
        engine_args=engine_args,
    )


def test_bad_constraint_backend_is_refused_naming_entry_and_field() -> None:
    pytest.importorskip("llama_cpp")
    from rig.engines import create_engine

    with pytest.raises(
        EngineError,
        match=r"entry 'tiny': engine_args.constraint_backend 'outline' is not one of "
        r"native, outlines",
    ):
        create_engine(_spec(constraint_backend="outline"), "x.gguf")


def test_outlines_backend_without_outlines_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("llama_cpp")
    from rig.engines import create_engine

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "outlines" else real(name, *a))
    with pytest.raises(EngineError, match=r"entry 'tiny': engine_args.constraint_backend outlines: .*rig\[outlines\]"):
        create_engine(_spec(constraint_backend="outlines"), "x.gguf")


def test_check_audit_refuses_a_mismatched_llguidance_vocabulary() -> None:
    from rig.decoding.outlines_backend import OutlinesUnavailable, VocabAudit, check_audit

    fields = {k: 0 for k, f in VocabAudit.model_fields.items() if f.annotation is int}
    ok = VocabAudit(**fields | {"model": "m", "n_vocab": 10, "outlines_entries": 10, "llguidance_tokens": 10})
    check_audit(ok)
    with pytest.raises(OutlinesUnavailable, match=r"does not match llama.cpp's .*use constraint_backend native"):
        check_audit(
            ok.model_copy(
                update={
                    "llguidance_mismatches": 2,
                    "llguidance_mismatches_utf8": 1,
                    "llguidance_mismatch_examples": ["7: b'ab' -> b'a'"],
                }
            )
        )
    with pytest.raises(OutlinesUnavailable):
        check_audit(ok.model_copy(update={"llguidance_tokens": 9}))


# --- the embedded model -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def outlines_engine(embedded_weights: str):  # type: ignore[no-untyped-def]
    if not HAS_OUTLINES:
        pytest.skip("outlines and llguidance not installed (pip install 'rig[outlines]')")
    from rig.engines import create_engine

    base = load_registry(REPO / "models.yaml").get("gemma3-270m")
    spec = base.model_copy(update={"engine_args": {**base.engine_args, "constraint_backend": "outlines"}})
    eng = create_engine(spec, embedded_weights)
    asyncio.run(eng.load())
    yield eng
    asyncio.run(eng.close())


def _chat(engine: Any, text: str, constraint: Constraint | None, max_tokens: int = 96) -> Any:
    req = ChatRequest(
        messages=[Message(role="user", content=text)], sampling=Sampling(max_tokens=max_tokens), constraint=constraint
    )
    return asyncio.run(engine.chat(req))


@pytest.mark.model
@needs_outlines
def test_audit_of_the_embedded_vocabulary(outlines_engine) -> None:  # type: ignore[no-untyped-def]
    """Outlines' own llama.cpp vocabulary is wrong for Gemma 3; the llguidance one the engine uses is not."""
    from rig.decoding.outlines_backend import audit_vocabulary

    a = outlines_engine._outlines.audit
    assert a.n_vocab == outlines_engine.llm.n_vocab() == 262144
    assert a.outlines_entries == a.n_vocab - a.outlines_missing
    assert (
        a.outlines_missing
        == a.dropped_over_buffer + a.collided
        == a.collided_same_bytes + a.collided_lossy + a.dropped_over_buffer
    )
    assert a.dropped_over_buffer > 0 and a.dropped_max_bytes > 32  # pieces over the 32-byte buffer vanish
    assert a.replacement_pieces == 128 and a.collided_lossy >= 127  # bytes 0x80-0xFF collapse onto U+FFFD
    # llama.cpp spells a newline with token 107; Outlines' dict keeps only the byte token <0x0A> for "\n"
    assert any(s.startswith("107 b'\\n'") for s in a.sample_affected) and a.sample_affected_ascii >= 1
    assert not a.outlines_tokenizer_ok
    assert a.llguidance_tokens == a.n_vocab and a.llguidance_mismatches_utf8 == 0 and a.llguidance_tokenizer_ok
    info = outlines_engine.describe()
    assert info["constraint_backend"] == "outlines" and info["outlines_vocab"]["llguidance_tokenizer_ok"] is True
    # the stand-alone entry point (builds both tokenizers itself) measures the same
    again = audit_vocabulary(outlines_engine.llm)
    assert again.model_dump(exclude={"seconds"}) == a.model_dump(exclude={"seconds"})


def _weather_tool() -> ToolSpec:
    return ToolSpec(
        name="get_weather",
        description="Weather forecast for a city",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 32}, "days": {"type": "integer"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    )


CALLNAVI_PARAMS_CAP = CALLNAVI_CAPS["params"]


def _callnavi_schema() -> dict:
    from rig.benchmarks.callnavi.data import Api
    from rig.benchmarks.callnavi.prompts import answer_schema

    apis = [
        Api(name="getWeather", parameters={"city": "string", "date": "string"}),
        Api(name="getRoute", parameters={"origin": "string", "destination": "string"}),
    ]
    return answer_schema(apis, "params")


def _envelope_schema() -> dict:
    from rig.agents.toolmode import envelope_schema

    return envelope_schema([_weather_tool()])


# case -> (schema, prompt, reply budget). CallNavi's answer at the benchmark's own params cap: its grammar admits
# every upstream gold answer (any argument keys, at most 6 per call, 5 calls), which a 96-token budget was met only
# by the model writing {} for every call, as it did under the old closed-object grammar.
CASES = {
    "callnavi": (
        _callnavi_schema,
        "APIs: getWeather(city, date), getRoute(origin, destination). Reply with the "
        "API calls that answer the question, for example "
        '{"API": ["getRoute"], "parameters": [{"origin": "A", "destination": "B"}]}. '
        "Question: what is the weather in Helsinki tomorrow?",
        CALLNAVI_PARAMS_CAP,
    ),
    "envelope": (_envelope_schema, "Tool get_weather(city, days). Call it for: weather in Tampere for 3 days.", 96),
}


@pytest.mark.model
@needs_outlines
@pytest.mark.parametrize("kind", ["json_schema", "yaml_schema"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_outlines_constrained_output_parses_and_validates(outlines_engine, case: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    schema_fn, prompt, budget = CASES[case]
    c = Constraint(kind=kind, schema_=schema_fn())
    before = outlines_engine.describe()["constrained_requests"]["outlines"]
    g = _chat(outlines_engine, prompt, c, max_tokens=budget)
    assert g.error is None, g.error
    assert g.finish_reason == "stop", g.text
    _value, err = parse_output(g.text, c)
    assert err is None, (err, g.text)
    assert g.completion_tokens and g.prompt_tokens and g.timings.ttft_s is not None
    served = outlines_engine.describe()["constrained_requests"]
    assert served["outlines"] == before + 1 and served["native"] == 0


@pytest.mark.model
@needs_outlines
def test_outlines_truncated_output_is_not_a_constraint_error(outlines_engine) -> None:  # type: ignore[no-untyped-def]
    c = Constraint(
        kind="json_schema",
        schema_={
            "type": "object",
            "properties": {"story": {"type": "string"}},
            "required": ["story"],
            "additionalProperties": False,
        },
    )
    g = _chat(outlines_engine, "Tell a long story in JSON.", c, max_tokens=8)
    assert g.error is None and g.finish_reason == "length" and g.completion_tokens == 8
    assert g.text.startswith("{") and parse_output(g.text, c)[1]  # cut short: does not parse, and says so


@pytest.mark.model
@needs_outlines
def test_outlines_unconstrained_request_uses_no_processor(outlines_engine) -> None:  # type: ignore[no-untyped-def]
    before = dict(outlines_engine.describe()["constrained_requests"])
    g = _chat(outlines_engine, "Say hello.", None, max_tokens=8)
    assert g.error is None and g.text
    assert outlines_engine.describe()["constrained_requests"] == before


@pytest.mark.model
@needs_outlines
def test_outlines_rejects_a_broken_grammar_before_decoding(outlines_engine) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        outlines_engine._outlines.processor("start: undefined_rule")
    g = _chat(outlines_engine, "x", Constraint(kind="grammar", grammar="root ::= undefined-rule"), max_tokens=4)
    assert g.error  # a recorded error, not an unconstrained answer


@pytest.mark.model
def test_engine_detokenize_keeps_pieces_longer_than_32_bytes(gemma_engine) -> None:  # type: ignore[no-untyped-def]
    """llama-cpp-python's Llama.detokenize drops such pieces (same 32-byte buffer as Outlines); the engine not."""
    import llama_cpp

    vocab = gemma_engine.llm._model.vocab
    buf = ctypes.create_string_buffer(256)
    long_ids = []
    for i in range(gemma_engine.llm.n_vocab()):
        if llama_cpp.llama_token_to_piece(vocab, i, buf, 32, 0, False) < 0:  # llama.cpp: buffer too small
            long_ids.append(i)
            if len(long_ids) == 3:
                break
    assert long_ids
    for i in long_ids:
        n = llama_cpp.llama_token_to_piece(vocab, i, buf, 256, 0, False)
        assert gemma_engine.detokenize([i]) == buf.raw[:n] and n > 32
    n = sum(llama_cpp.llama_token_to_piece(vocab, i, buf, 256, 0, False) for i in long_ids)
    assert len(gemma_engine.detokenize(long_ids)) == n
    assert gemma_engine.detokenize(gemma_engine.llm.tokenize(b"Hello, world", add_bos=False)) == b"Hello, world"
