"""The engine base: typed engine_args per engine, and the one post-processing (finalize) every reply goes through.

No backend library is needed: engine classes are imported from their modules directly (their backends are imported
only at load), and ``generate`` is replaced by a canned reply where a test needs one.
"""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import Any

import pytest

from rig.engines import ENGINES
from rig.engines.base import FIRST_SAMPLING, Capabilities, Engine, EngineArgs, EngineError, Reply, openai_tools
from rig.records import ChatRequest, Generation, Message, Sampling, ToolSpec
from rig.registry import ModelSpec, Weights, load_registry

REPO = Path(__file__).resolve().parents[2]
TOOLS = [
    ToolSpec(
        name="getWeather",
        description="Weather for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
]
# The least each engine needs in engine_args to be constructed.
MINIMAL: dict[str, dict[str, Any]] = {"openai_compat": {"base_url": "http://127.0.0.1:8000"}}


def engine_cls(name: str) -> type[Engine]:
    module, cls = ENGINES[name].target.split(":")
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


def spec(engine: str = "llamacpp", thinking: str = "none", **engine_args: Any) -> ModelSpec:
    return ModelSpec(
        name="tiny",
        base="tiny",
        engine=engine,
        weights=Weights(file="x.gguf"),  # type: ignore[arg-type]
        quantization="q4",
        context_length=512,
        thinking=thinking,  # type: ignore[arg-type]
        engine_args=MINIMAL.get(engine, {}) | engine_args,
    )


def request(**kw: Any) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content="Weather in Helsinki?")], **kw)


# -- engine_args --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ENGINES))
def test_every_engine_declares_a_strict_args_model(name: str) -> None:
    cls = engine_cls(name)
    assert issubclass(cls.Args, EngineArgs) and cls.Args is not EngineArgs
    assert cls.Args.model_config.get("extra") == "forbid"


@pytest.mark.parametrize("name", list(ENGINES))
def test_unknown_engine_arg_is_refused_naming_entry_and_field(name: str) -> None:
    with pytest.raises(
        EngineError,
        match=rf"models.yaml entry 'tiny': engine_args \['n_gpu_layer'\] not understood "
        rf"by {name} \(allowed: \[.*\]\)",
    ):
        engine_cls(name)(spec(name, n_gpu_layer=3), "x")


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("llamacpp", {"grammar_mask": "sometimes"}, r"engine_args.grammar_mask 'sometimes' is not one of lazy, full"),
        ("llamacpp", {"n_batch": "big"}, r"engine_args.n_batch 'big': Input should be a valid integer"),
        ("vllm", {"gpu_memory_utilization": "most"}, r"engine_args.gpu_memory_utilization 'most': Input should be"),
        ("ollama", {"host": "http://10.0.0.5:11434"}, r"engine_args.host: 'http://10.0.0.5:11434' is not on loopback"),
        ("ollama", {"preload": "sometimes"}, r"engine_args.preload 'sometimes': Input should be a valid boolean"),
        ("openai_compat", {"spawn": []}, r"engine_args.spawn: must be a non-empty list of strings"),
        ("openai_compat", {"usage_fallback": "stream"}, r"engine_args.usage_fallback 'stream' is not one of nonstream"),
        (
            "openai_compat",
            {"spawn": ["python", "-m", "server"]},
            r"openai_compat needs exactly one of "
            r"engine_args.base_url .* or engine_args.spawn",
        ),
    ],
)
def test_bad_engine_arg_value_is_refused_naming_entry_and_field(name: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(EngineError, match=r"^models.yaml entry 'tiny': " + message):
        engine_cls(name)(spec(name, **args), "x")


def test_engines_read_typed_args() -> None:
    from rig.engines.llamacpp import LlamaCppEngine
    from rig.engines.ollama import OllamaEngine
    from rig.engines.openai_compat import OpenAICompatEngine
    from rig.engines.vllm import VllmEngine

    llama = LlamaCppEngine(spec("llamacpp", n_batch="256", grammar_mask="full"), "x")
    assert llama.args.grammar_mask == "full" and llama.args.llama_kwargs() == {"n_batch": 256}  # only what was set
    vllm = VllmEngine(spec("vllm", max_num_seqs=8), "x")
    assert vllm.capabilities.max_concurrency == 8 and vllm.args.model_dump(exclude_unset=True) == {"max_num_seqs": 8}
    ollama = OllamaEngine(spec("ollama", host="http://localhost:11434/", max_concurrency="3"), "x")
    assert ollama.host == "http://localhost:11434" and ollama.capabilities.max_concurrency == 3
    srv = OpenAICompatEngine(spec("openai_compat", base_url=None, spawn=["python", "-m", "s", 8]), "x")
    assert srv.args.spawn == ["python", "-m", "s", "8"]


def test_shipped_models_yaml_engine_args_validate() -> None:
    reg = load_registry(REPO / "models.yaml")
    for m in reg.models.values():
        assert engine_cls(m.engine).Args.model_validate(m.engine_args) is not None, m.name


# -- finalize ---------------------------------------------------------------------------------------------------


class Canned(Engine):
    """An engine whose backend returns a fixed reply; counts finalize calls."""

    name = "canned"

    def __init__(self, reply: Reply, thinking: str = "none") -> None:
        super().__init__(spec(thinking=thinking), "x")
        self.reply = reply
        self.finalized = 0

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities()

    async def load(self) -> None:
        return None

    async def generate(self, request: ChatRequest) -> Reply:
        return self.reply

    def finalize(self, reply: Reply, request: ChatRequest) -> Generation:
        self.finalized += 1
        return super().finalize(reply, request)


def chat(reply: Reply, thinking: str = "none", **req: Any) -> tuple[Generation, Canned]:
    eng = Canned(reply, thinking)
    return asyncio.run(eng.chat(request(**req))), eng


def gen(text: str = "", **kw: Any) -> Generation:
    return Generation(request_hash="h", text=text, **kw)


def test_thinking_stripped_before_text_tool_calls_are_read() -> None:
    text = (
        '<think>maybe {"name": "nope", "arguments": {}}</think>\n'
        '<tool_call>{"name": "getWeather", "arguments": {"city": "Oulu"}}</tool_call>'
    )
    g, eng = chat(Reply(gen(text)), thinking="strip", tools=TOOLS, tool_mode="native")
    assert "<think>" not in g.text and g.parse_status == "ok"
    assert [(c.name, c.arguments) for c in g.tool_calls] == [("getWeather", {"city": "Oulu"})]
    assert eng.counters["tool_calls_from_text"] == 1 and eng.finalized == 1
    kept, _ = chat(Reply(gen("<think>x</think>answer")))  # thinking: none leaves the text alone
    assert kept.text == "<think>x</think>answer"


@pytest.mark.parametrize(
    ("calls", "status", "parsed"),
    [
        ([("getWeather", '{"city": "Turku"}')], "ok", [("getWeather", {"city": "Turku"})]),
        ([("getWeather", {"city": "Turku"})], "ok", [("getWeather", {"city": "Turku"})]),
        ([("getWeather", "")], "ok", [("getWeather", {})]),  # a call without arguments
        ([("getWeather", '{"city": ')], "parse_error", []),
        ([("getWeather", "[1, 2]")], "parse_error", []),
        ([("a", "{}"), ("b", "{oops")], "parse_error", [("a", {})]),
    ],
    ids=["json-text", "object", "empty", "broken", "not-an-object", "one-of-two"],
)
def test_native_call_arguments_parsed_as_json(calls: list, status: str, parsed: list) -> None:
    g, eng = chat(Reply(gen('{"name": "ignored", "arguments": {}}'), calls=calls), tools=TOOLS, tool_mode="native")
    assert g.parse_status == status and [(c.name, c.arguments) for c in g.tool_calls] == parsed
    assert eng.counters["tool_calls_from_text"] == 0  # the backend's calls win over the text


@pytest.mark.parametrize(
    ("reply", "form"),
    [
        (Reply(gen("x"), calls=[("getWeather", '{"city": "Turku"}')]), "native"),
        (Reply(gen('<tool_call>{"name": "getWeather", "arguments": {"city": "Turku"}}</tool_call>')), "tagged"),
        (Reply(gen('Let me check.\n```json\n{"name": "getWeather", "arguments": {"city": "Turku"}}\n```')), "fenced"),
        (Reply(gen("x"), calls=[("getWeather", "{oops")]), None),
        (Reply(gen("It is sunny.")), None),
    ],
    ids=["backend", "tagged", "fenced", "broken", "none"],
)
def test_the_form_of_the_calls_read_is_recorded(reply: Reply, form: str | None) -> None:
    g, _ = chat(reply, tools=TOOLS, tool_mode="native")
    assert g.call_form == form and bool(g.tool_calls) == (form is not None)


def test_tool_calls_read_only_for_native_tools_and_only_without_error() -> None:
    call = '{"name": "getWeather", "arguments": {"city": "Oulu"}}'
    prompt_mode, _ = chat(Reply(gen(call)), tools=TOOLS)  # tools offered in the prompt: the agent reads them
    assert prompt_mode.parse_status == "not_parsed" and prompt_mode.tool_calls == []
    failed, _ = chat(Reply(gen(call, error="server gone")), tools=TOOLS, tool_mode="native")
    assert failed.parse_status == "not_parsed" and failed.error == "server gone"
    plain, _ = chat(Reply(gen("It is sunny.")), tools=TOOLS, tool_mode="native")
    assert plain.parse_status == "no_call"


def test_decode_speed_from_the_span_after_the_first_token() -> None:
    g, _ = chat(Reply(gen("abc", completion_tokens=11), decode_s=2.0))
    assert g.timings.decode_tps == pytest.approx(5.0)  # 10 tokens after the first, over 2 s
    for n, span in ((1, 2.0), (None, 2.0), (11, 0.0), (11, None)):
        g, _ = chat(Reply(gen("abc", completion_tokens=n), decode_s=span))
        assert g.timings.decode_tps is None, (n, span)  # not measured, never a made-up number
    own = gen("abc", completion_tokens=11)
    own.timings.decode_tps = 44.0  # a backend's own definition (Ollama: eval_count / eval_duration) is kept
    g, _ = chat(Reply(own, decode_s=2.0))
    assert g.timings.decode_tps == 44.0


@pytest.mark.parametrize("name", list(ENGINES))
def test_every_engine_chat_is_generate_then_finalize_once(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each real engine class: its chat runs its generate, then the shared finalize exactly once."""
    cls = engine_cls(name)
    assert cls.chat is Engine.chat and cls.finalize is Engine.finalize  # no engine post-processes on its own
    eng = cls(spec(name, thinking="strip"), "x")
    text = '<think>plan</think>{"name": "getWeather", "arguments": {"city": "Oulu"}}'

    async def canned(request: ChatRequest) -> Reply:
        return Reply(gen(text, completion_tokens=5), decode_s=0.5)

    calls = []
    real = Engine.finalize

    def spy(self: Engine, reply: Reply, request: ChatRequest) -> Generation:
        calls.append(reply)
        return real(self, reply, request)

    monkeypatch.setattr(eng, "generate", canned)
    monkeypatch.setattr(Engine, "finalize", spy)
    g = asyncio.run(eng.chat(request(tools=TOOLS, tool_mode="native")))
    assert len(calls) == 1
    assert g.text.startswith("{") and g.parse_status == "ok" and g.tool_calls[0].arguments == {"city": "Oulu"}
    assert g.timings.decode_tps == pytest.approx(8.0)


def test_openai_tools_is_the_function_shape() -> None:
    assert openai_tools(TOOLS) == [
        {
            "type": "function",
            "function": {
                "name": "getWeather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    assert openai_tools([]) == []


# -- sampling as data ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ENGINES))
def test_every_engine_maps_sampling_fields_it_names_and_takes_the_first_ones(name: str) -> None:
    table = engine_cls(name).SAMPLING
    assert set(table) <= set(Sampling.model_fields)
    assert set(FIRST_SAMPLING) <= set(table)  # what every engine sent before the tables


def test_each_engine_sends_the_fields_set_under_its_own_names() -> None:
    s = Sampling(temperature=0.5, top_k=None, min_p=0.1, repeat_penalty=1.2, max_tokens=32, stop=[])
    llama = engine_cls("llamacpp")(spec(), "x.gguf")
    # the decode loop's own fields are not passed by name; an unset top_k / empty stop is left to the neutral value
    assert llama.sampling_args(s) == {"temp": 0.5, "top_p": 1.0, "min_p": 0.1, "repeat_penalty": 1.2}
    vllm = engine_cls("vllm")(spec("vllm"), "x")
    assert vllm.sampling_args(s)["repetition_penalty"] == 1.2 and vllm.sampling_args(s)["max_tokens"] == 32
    ollama = engine_cls("ollama")(spec("ollama"), "x")
    assert ollama.sampling_args(s)["num_predict"] == 32 and "max_tokens" not in ollama.sampling_args(s)
    # an earlier request (no min_p / repeat_penalty) is sent exactly as before they existed
    assert "min_p" not in llama.sampling_args(Sampling()) and "repeat_penalty" not in ollama.sampling_args(Sampling())


def test_a_sampling_field_the_engine_cannot_take_is_refused_naming_entry_and_field() -> None:
    entry = spec("openai_compat").model_copy(update={"sampling": Sampling(repeat_penalty=1.1)})
    with pytest.raises(EngineError, match=r"entry 'tiny': sampling\.repeat_penalty is not supported by engine "):
        engine_cls("openai_compat")(entry, "x")

    class Older(Engine):  # a plugin from before the tables: the first fields, nothing later
        name = "older"

        @property
        def capabilities(self) -> Capabilities:
            return Capabilities()

        async def load(self) -> None:
            return None

    Older(spec().model_copy(update={"sampling": Sampling(temperature=0.7, top_k=5)}), "x.gguf")
    with pytest.raises(EngineError, match=r"sampling\.min_p is not supported by engine 'older'"):
        Older(spec().model_copy(update={"sampling": Sampling(min_p=0.05)}), "x.gguf")


def test_rig_bench_refuses_it_before_the_run_folder_exists(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rig.cli import app

    (tmp_path / "models.yaml").write_text(
        "models:\n  srv:\n    engine: openai_compat\n    weights: {served: m}\n    quantization: bf16\n"
        "    context_length: 512\n    engine_args: {base_url: 'http://127.0.0.1:9'}\n"
        "    sampling: {repeat_penalty: 1.1}\n"
    )
    args = ["bench", "--models", str(tmp_path / "models.yaml"), "--model", "srv", "--out", str(tmp_path / "runs")]
    r = CliRunner().invoke(app, [*args, "--benchmark", "callnavi", "--limit", "1"])
    assert r.exit_code == 2, r.output
    assert "models.yaml entry 'srv': sampling.repeat_penalty is not supported by engine 'openai_compat'" in r.output
    assert not (tmp_path / "runs").exists()
