"""The vLLM engine against vLLM's own classes, on the CPU: no model is loaded, so no GPU is needed.

What the engine builds (sampling parameters, structured-output requests, engine arguments, the generate call,
tool-call parsing, timings) goes through the installed vLLM's real code. Skipped where vLLM is not installed
(it is not in CI: its wheels pull a CUDA build of torch). The GPU tests in test_vllm.py cover the rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

pytest.importorskip("vllm")

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.sampling_params import RequestOutputKind, SamplingParams
from vllm.v1.metrics.stats import RequestStateStats
from vllm.v1.structured_output.backend_guidance import serialize_guidance_grammar, validate_guidance_grammar
from vllm.v1.structured_output.backend_outlines import validate_structured_output_request_outlines
from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar
from vllm.v1.structured_output.request import get_structured_output_key
from vllm.v1.structured_output.utils import grammar_is_likely_lark

from rig.decoding.constraint import Constraint
from rig.engines.base import EngineError
from rig.engines.vllm import DEFAULT_CONSTRAINT_BACKEND, NO_SPECIAL_TOKENS, VllmEngine
from rig.records import ChatRequest, Generation, Message, Sampling, ToolSpec
from rig.registry import ModelSpec, Weights

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["city"],
    "additionalProperties": False,
}
TOOL = ToolSpec(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def _engine(backend: str | None = None, **spec: Any) -> VllmEngine:
    if backend is not None:
        spec["engine_args"] = {"constraint_backend": backend}
    s = ModelSpec(
        name="v",
        base="v",
        engine="vllm",
        weights=Weights(dir="unused"),
        quantization="bf16",
        context_length=4096,
        **spec,
    )
    return VllmEngine(s, "unused")


def _request(constraint: Constraint | None = None, **kw: Any) -> ChatRequest:
    return ChatRequest(
        messages=[Message(role="user", content="Weather in Helsinki?")],
        sampling=Sampling(max_tokens=77, temperature=0.0, seed=5),
        constraint=constraint,
        **kw,
    )


CASES = [
    (Constraint(kind="json_schema", schema_=SCHEMA), '{"city": "Espoo \\/ Helsinki", "n": 3}'),
    (Constraint(kind="yaml_schema", schema_=SCHEMA), 'city: "Espoo"\nn: 3\n'),
    (Constraint(kind="grammar", grammar='root ::= "a" [0-9]+'), "a42"),
    (Constraint(kind="regex", pattern=r"[A-Z]{2}-\d{3}"), "FI-123"),
    (Constraint(kind="choice", choices=["A", "B", "C"]), "B"),
]


def _guidance_accepts(params: SamplingParams, text: str) -> bool:
    """What vLLM's guidance backend compiles for the request (its own serializer), stepped byte by byte."""
    from rig.decoding.accept import GuidanceAcceptor

    acc = GuidanceAcceptor()
    m = acc.llg.LLMatcher(acc.tok, serialize_guidance_grammar(*get_structured_output_key(params.structured_outputs)))
    return bool(m.consume_tokens(list(text.encode())) and not m.is_error() and m.is_accepting())


def _xgrammar_accepts(params: SamplingParams, text: str) -> bool:
    from tests.decoding.conftest import XGrammarMatcher

    return bool(XGrammarMatcher().accepts(params.structured_outputs.grammar, text))


@pytest.mark.parametrize(("constraint", "sample"), CASES, ids=["json", "yaml", "grammar", "regex", "choice"])
@pytest.mark.parametrize("backend", ["guidance", "xgrammar"])
def test_sampling_params_pass_the_backends_vllm_validation(constraint: Constraint, sample: str, backend: str) -> None:
    """Each request passes the admission check of the backend the engine runs (vLLM's own validation) and what that
    backend compiles accepts a right answer and refuses a wrong one."""
    params = _engine(backend)._sampling(_request(constraint))
    assert isinstance(params, SamplingParams)
    assert params.max_tokens == 77 and params.seed == 5 and params.temperature == 0.0  # vLLM's default is 16
    assert params.output_kind == RequestOutputKind.FINAL_ONLY and params.skip_special_tokens is False
    so = params.structured_outputs
    assert so is not None
    if backend == "guidance":
        validate_guidance_grammar(params)
        if constraint.kind in ("json_schema", "yaml_schema"):
            assert so.grammar and grammar_is_likely_lark(so.grammar)  # rig's own Lark, not a conversion of GBNF
        assert _guidance_accepts(params, sample) and not _guidance_accepts(params, sample + "}")
    else:
        validate_xgrammar_grammar(params)  # raises if refused
        if constraint.kind in ("json_schema", "yaml_schema"):
            assert so.grammar and not grammar_is_likely_lark(so.grammar)  # read as EBNF, not Lark
        if so.grammar:  # and what it compiles, with the same xgrammar release
            assert _xgrammar_accepts(params, sample) and not _xgrammar_accepts(params, sample + "}")


@pytest.mark.parametrize(("constraint", "sample"), [CASES[0], *CASES[3:]], ids=["json", "regex", "choice"])
def test_the_outlines_backend_gets_schemas_and_regexes(constraint: Constraint, sample: str) -> None:
    engine = _engine("outlines")
    assert engine.capabilities.grammar_kinds == ("json_schema", "regex", "choice")  # no grammar, so no YAML
    params = engine._sampling(_request(constraint))
    validate_structured_output_request_outlines(params)
    if constraint.kind == "json_schema":
        assert params.structured_outputs.json == SCHEMA


def test_the_default_backend_is_the_measured_one_and_is_recorded() -> None:
    engine = _engine()
    assert DEFAULT_CONSTRAINT_BACKEND == "guidance" and engine.describe() == {"constraint_backend": "guidance"}
    assert _engine("xgrammar").describe() == {"constraint_backend": "xgrammar"}


@pytest.mark.parametrize("bound", [24, 120, 1200])
def test_the_chosen_backend_enforces_a_string_bound(bound: int) -> None:
    """rig bounds JSON and YAML strings by the schema's maxLength: through what vLLM's guidance backend compiles, a
    string of ``bound`` characters is accepted and one more refused, in both formats."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": bound}},
        "required": ["name"],
        "additionalProperties": False,
    }
    engine = _engine()
    for kind, write in (
        ("json_schema", lambda v: json.dumps({"name": v})),
        ("yaml_schema", lambda v: f'name: "{v}"\n'),
    ):
        params = engine._sampling(_request(Constraint(kind=kind, schema_=schema)))
        validate_guidance_grammar(params)
        assert _guidance_accepts(params, write("é" * bound)), (kind, bound)
        assert not _guidance_accepts(params, write("é" * (bound + 1))), (kind, bound)


def test_a_backend_whose_package_is_missing_is_refused_naming_the_entry_and_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "xgrammar" else real(name, *a))
    with pytest.raises(EngineError, match=r"entry 'v': engine_args.constraint_backend xgrammar: .*'xgrammar'"):
        _engine("xgrammar")
    with pytest.raises(EngineError, match=r"engine_args.constraint_backend 'lm-format-enforcer' is not one of"):
        _engine("lm-format-enforcer")
    with pytest.raises(EngineError, match="outlines takes no grammar"):
        _engine("outlines", thinking="strip")


def test_unconstrained_request_has_no_structured_outputs() -> None:
    params = _engine()._sampling(_request())
    assert params.structured_outputs is None and params.max_tokens == 77


def test_engine_args_are_vllm_fields() -> None:
    fields = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    passed_by_load = {"model", "max_model_len", "seed", "disable_log_stats", "structured_outputs_config"}
    ours = set(VllmEngine.Args.model_fields) - {"constraint_backend"}  # rig's own: structured_outputs_config
    assert ours | passed_by_load <= fields, sorted((ours | passed_by_load) - fields)


class _FakeAsyncLLM:
    """Stands in for AsyncLLM.generate only; the output objects are vLLM's own."""

    def __init__(self, text: str) -> None:
        self.text, self.calls = text, []  # type: ignore[var-annotated]

    async def generate(self, prompt: Any, params: SamplingParams, request_id: str, **kw: Any):  # type: ignore[no-untyped-def]
        self.calls.append((prompt, params, kw))
        stats = RequestStateStats(
            queued_ts=10.0, scheduled_ts=10.25, first_token_ts=11.0, last_token_ts=12.0, first_token_latency=0.5
        )
        out = CompletionOutput(
            index=0,
            text=self.text,
            token_ids=list(range(11)),
            cumulative_logprob=None,
            logprobs=None,
            finish_reason="stop",
        )
        yield RequestOutput(
            request_id=request_id,
            prompt=None,
            prompt_token_ids=[1, 2, 3],
            prompt_logprobs=None,
            outputs=[out],
            finished=True,
            metrics=stats,
            num_cached_tokens=2,
        )


class _Tokenizer:
    BOS = -1  # what encode adds unless told not to (transformers' default)

    def apply_chat_template(self, msgs, tools=None, add_generation_prompt=True, tokenize=False, **kw):  # type: ignore[no-untyped-def]
        return "<bos>" + json.dumps(msgs)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return ([self.BOS] if add_special_tokens else []) + [ord(ch) for ch in text]


def _chat(text: str, thinking: str = "none", **request: Any) -> tuple[Generation, _FakeAsyncLLM]:
    from vllm.tool_parsers import ToolParserManager

    eng = _engine(tool_format="hermes", thinking=thinking)
    eng.engine, eng.tokenizer = _FakeAsyncLLM(text), _Tokenizer()
    eng._parser = ToolParserManager.get_tool_parser("hermes")(eng.tokenizer)
    return asyncio.run(eng.chat(_request(**request))), eng.engine


def test_chat_counts_timings_and_no_second_bos() -> None:
    gen, fake = _chat("It is sunny.")
    assert gen.error is None and gen.text == "It is sunny." and gen.finish_reason == "stop"
    assert (gen.prompt_tokens, gen.completion_tokens, gen.cached_prompt_tokens) == (3, 11, 2)
    assert gen.timings.ttft_s == 0.5 and gen.timings.queue_s == 0.25
    assert gen.timings.decode_tps == pytest.approx(10.0)  # 10 tokens after the first, over 1 s
    prompt, _, kw = fake.calls[0]
    ids = prompt["prompt_token_ids"]  # token ids, not the deprecated text prompt; the template's BOS only
    assert _Tokenizer.BOS not in ids and "".join(map(chr, ids)).startswith("<bos>")
    assert kw["tokenization_kwargs"] == NO_SPECIAL_TOKENS


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Helsinki"}}\n</tool_call>',
            "ok",
            [("get_weather", {"city": "Helsinki"})],
        ),
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call>', "parse_error", []),
        ("Helsinki is cloudy.", "no_call", []),
    ],
    ids=["call", "malformed", "text"],
)
def test_hermes_tool_calls_through_vllms_parser(text: str, status: str, calls: list) -> None:
    gen, _ = _chat(text, tools=[TOOL], tool_mode="native")
    assert gen.error is None and gen.parse_status == status
    assert [(c.name, c.arguments) for c in gen.tool_calls] == calls


@pytest.mark.parametrize(
    "constraint",
    [Constraint(kind="json_schema", schema_=SCHEMA), Constraint(kind="choice", choices=["A", "B"])],
    ids=["json", "choice"],
)
def test_thinking_strip_lets_the_model_think_before_the_constraint(constraint: Constraint) -> None:
    from tests.decoding.conftest import XGrammarMatcher

    params = _engine("xgrammar", thinking="strip")._sampling(_request(constraint))
    validate_xgrammar_grammar(params)
    answer = '{"city": "Oulu"}' if constraint.kind == "json_schema" else "B"
    m = XGrammarMatcher()
    grammar = params.structured_outputs.grammar
    assert m.accepts(grammar, "<think>Oulu is north.</think>\n" + answer) and m.accepts(grammar, answer)
    assert not m.accepts(grammar, "Let me think. " + answer)


def test_thinking_strip_removes_the_block_before_tool_parsing() -> None:
    text = (
        '<think>Maybe <tool_call>{"name": "nope", "arguments": {}}</tool_call>?</think>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Turku"}}\n</tool_call>'
    )
    gen, _ = _chat(text, thinking="strip", tools=[TOOL], tool_mode="native")
    assert "<think>" not in gen.text and [(c.name, c.arguments) for c in gen.tool_calls] == [
        ("get_weather", {"city": "Turku"})
    ]


@pytest.mark.parametrize(
    ("transport", "constraint", "field"),
    [
        ("structured_outputs.grammar", Constraint(kind="yaml_schema", schema_=SCHEMA), "grammar"),
        ("structured_outputs.json", Constraint(kind="json_schema", schema_=SCHEMA), "json"),
        ("response_format.json_schema", Constraint(kind="json_schema", schema_=SCHEMA), "json"),
        ("structured_outputs.choice", Constraint(kind="choice", choices=["A", "B"]), "choice"),
        ("structured_outputs.regex", Constraint(kind="regex", pattern=r"[A-Z]{2}"), "regex"),
    ],
)
def test_openai_compat_bodies_reach_vllm_serve_as_constraints(
    transport: str, constraint: Constraint, field: str
) -> None:
    """What the OpenAI-compatible engine posts to `vllm serve`, read by vLLM's own request model: the constraint
    must arrive in the sampling parameters, not be dropped as an unknown field."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    from rig.engines.openai_compat import _TRANSPORTS

    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 32,
        "temperature": 0.0,
        "seed": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"enable_thinking": False},
    } | _TRANSPORTS[transport](constraint)
    req = ChatCompletionRequest.model_validate(body)
    assert not (req.model_extra or {}), req.model_extra  # nothing silently ignored
    params = req.to_sampling_params(32, {})
    assert params.max_tokens == 32 and params.seed == 1
    assert getattr(params.structured_outputs, field), params.structured_outputs
    validate_xgrammar_grammar(params)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            "{constraint_backend: lm-format-enforcer}",
            "engine_args.constraint_backend 'lm-format-enforcer' is not one of guidance, xgrammar, outlines",
        ),
        (
            "{constraint_backend: outlines}\n    thinking: strip",
            "engine_args.constraint_backend outlines takes no grammar",
        ),
    ],
)
def test_rig_bench_refuses_a_backend_entry_before_anything_runs(args: str, says: str, tmp_path: Any) -> None:
    """As a user meets it: exit 2 naming the entry and the field, no model loaded and no run folder made."""
    from typer.testing import CliRunner

    from rig.cli import app

    (tmp_path / "models.yaml").write_text(
        "models:\n  g:\n    engine: vllm\n    quantization: bf16\n    context_length: 2048\n"
        f"    weights: {{dir: {tmp_path}}}\n    engine_args: {args}\n"
    )
    argv = ["bench", "-m", "g", "-b", "callnavi", "--limit", "1", "--models", str(tmp_path / "models.yaml")]
    r = CliRunner().invoke(app, [*argv, "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2 and "models.yaml entry 'g'" in r.output and says in " ".join(r.output.split()), r.output
    assert not (tmp_path / "runs").exists()
