"""CONTRACT tests for the Ollama engine: no Ollama here, so a stub HTTP server on 127.0.0.1 replays the documented
wire format of /api/version, /api/show, /api/chat (streamed NDJSON chunks, durations in nanoseconds) and /api/ps.
They check what the adapter sends and how it reads answers and failures, not a live server's behaviour.
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rig.decoding.constraint import Constraint
from rig.engines import create_engine
from rig.engines.base import EngineError
from rig.engines.ollama import OllamaEngine
from rig.engines.server import free_port
from rig.records import ChatRequest, Message, Sampling, ToolSpec
from rig.registry import ModelSpec, Weights

pytestmark = pytest.mark.contract

TAG = "gemma3:270m"
NUM_CTX = 2048


class Stub:
    """What the fake Ollama knows and answers; ``requests`` records (method, path, body)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.version = "0.33.0"
        self.pulled = {TAG}
        self.show_answer: tuple[int, dict[str, Any]] | None = None  # overrides /api/show
        self.content = ["The ", "answer."]
        self.tool_calls: list[dict[str, Any]] | None = None
        self.final: dict[str, Any] = {
            "prompt_eval_count": 64,
            "eval_count": 5,
            "done_reason": "stop",
            "total_duration": 2_000_000_000,
            "load_duration": 50_000_000,
            "prompt_eval_duration": 100_000_000,
            "eval_duration": 250_000_000,
        }
        self.mid_stream_error: str | None = None

    def chats(self) -> list[dict[str, Any]]:
        return [b for m, p, b in self.requests if p == "/api/chat" and b.get("messages")]


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def _json(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            stub.requests.append(("GET", self.path, None))
            if self.path == "/api/version":
                self._json(200, {"version": stub.version})
            elif self.path == "/api/tags":
                self._json(200, {"models": [{"name": t, "model": t} for t in sorted(stub.pulled)]})
            elif self.path == "/api/ps":
                self._json(
                    200,
                    {
                        "models": [
                            {
                                "name": TAG,
                                "model": TAG,
                                "size": 700_000_000,
                                "size_vram": 512_000_000,
                                "digest": "abc",
                                "expires_at": "2026-11-22T20:00:00Z",
                                "context_length": NUM_CTX,
                                "details": {"format": "gguf", "family": "gemma3", "quantization_level": "Q8_0"},
                            }
                        ]
                    },
                )
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            stub.requests.append(("POST", self.path, body))
            model = body.get("model")
            if self.path == "/api/show":
                if stub.show_answer:
                    self._json(*stub.show_answer)
                elif model not in stub.pulled:
                    self._json(404, {"error": f"model '{model}' not found"})
                else:
                    self._json(
                        200,
                        {
                            "details": {
                                "format": "gguf",
                                "family": "gemma3",
                                "parameter_size": "268.10M",
                                "quantization_level": "Q8_0",
                            },
                            "model_info": {"general.architecture": "gemma3", "gemma3.context_length": 32768},
                            "capabilities": ["completion", "tools"],
                        },
                    )
            elif self.path == "/api/chat":
                if model not in stub.pulled:
                    self._json(404, {"error": f'model "{model}" not found, try pulling it first'})
                elif not body.get("messages"):  # documented "load a model" request
                    self._json(
                        200,
                        {
                            "model": model,
                            "created_at": "2026-11-22T19:00:00Z",
                            "message": {"role": "assistant", "content": ""},
                            "done_reason": "load",
                            "done": True,
                        },
                    )
                else:
                    self._stream_chat(model)
            else:
                self._json(404, {"error": "not found"})

        def _stream_chat(self, model: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.end_headers()  # HTTP/1.0: the body ends when the connection closes
            base = {"model": model, "created_at": "2026-11-22T19:00:00Z"}
            for piece in stub.content:
                self._line(base | {"message": {"role": "assistant", "content": piece}, "done": False})
            if stub.mid_stream_error:
                self._line({"error": stub.mid_stream_error})
                return
            if stub.tool_calls:
                self._line(
                    base
                    | {"message": {"role": "assistant", "content": "", "tool_calls": stub.tool_calls}, "done": False}
                )
            self._line(base | {"message": {"role": "assistant", "content": ""}, "done": True} | stub.final)

        def _line(self, obj: dict[str, Any]) -> None:
            self.wfile.write(json.dumps(obj).encode() + b"\n")
            self.wfile.flush()

    return Handler


@pytest.fixture
def stub():  # type: ignore[no-untyped-def]
    s = Stub()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(s))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    s.url = f"http://127.0.0.1:{httpd.server_address[1]}"  # type: ignore[attr-defined]
    yield s
    httpd.shutdown()
    httpd.server_close()


def make(host: str, tag: str = TAG, **spec_kw: Any) -> OllamaEngine:
    spec = ModelSpec(
        name="g-ollama",
        base="g-ollama",
        engine="ollama",
        weights=Weights(ollama=tag),
        quantization="q8_0",
        context_length=NUM_CTX,
        engine_args={"host": host},
        **spec_kw,
    )
    eng = create_engine(spec, tag)
    assert isinstance(eng, OllamaEngine)
    return eng


def run(eng: OllamaEngine, *requests: ChatRequest):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        await eng.load()
        try:
            return [await eng.chat(r) for r in requests]
        finally:
            await eng.close()

    return asyncio.run(go())


def req(text: str = "Hello?", **kw: Any) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=text)], **kw)


TOOLS = [
    ToolSpec(
        name="getWeather",
        description="Weather for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
]


def test_options_set_explicitly_on_every_call(stub) -> None:  # type: ignore[no-untyped-def]
    eng = make(stub.url, thinking="off")
    a, b = run(
        eng,
        req(sampling=Sampling(temperature=0.0, seed=1, max_tokens=7, top_p=1.0)),
        req(sampling=Sampling(temperature=0.7, seed=2, max_tokens=9, top_p=0.9, top_k=20)),
    )
    assert a.error is None and b.error is None
    sent = stub.chats()
    assert [c["options"] for c in sent] == [
        {"num_ctx": NUM_CTX, "temperature": 0.0, "seed": 1, "num_predict": 7, "top_p": 1.0},
        {"num_ctx": NUM_CTX, "temperature": 0.7, "seed": 2, "num_predict": 9, "top_p": 0.9, "top_k": 20},
    ]
    assert all(c["stream"] is True and c["think"] is False and "format" not in c and "tools" not in c for c in sent)
    # the preload at load() already uses the run's num_ctx, so the first call does not reload the model
    preload = [b for m, p, b in stub.requests if p == "/api/chat" and not b.get("messages")]
    assert preload and preload[0]["options"]["num_ctx"] == NUM_CTX


def test_counts_and_nanosecond_durations_parsed(stub) -> None:  # type: ignore[no-untyped-def]
    eng = make(stub.url)
    (g,) = run(eng, req())
    assert g.error is None and g.text == "The answer." and g.finish_reason == "stop"
    assert (g.prompt_tokens, g.completion_tokens) == (64, 5)
    assert g.timings.decode_tps == pytest.approx(5 / 0.25)  # eval_count / eval_duration
    assert 0 < g.timings.ttft_s <= g.timings.e2e_s
    assert g.parse_status == "not_parsed" and g.tool_calls == []
    t = eng.server_timings[-1]
    assert t == {"request_hash": g.request_hash, "load_s": 0.05, "prompt_eval_s": 0.1, "eval_s": 0.25, "total_s": 2.0}
    assert eng.versions()["ollama-server"] == "0.33.0"
    assert eng.model_details["context_length"] == 32768 and eng.capabilities.native_tools


def test_json_schema_sent_as_format_other_constraints_refused(stub) -> None:  # type: ignore[no-untyped-def]
    schema = {"type": "object", "properties": {"API": {"type": "string"}}, "required": ["API"]}
    eng = make(stub.url)
    (g,) = run(eng, req(constraint=Constraint(kind="json_schema", schema_=schema)))
    assert g.error is None and stub.chats()[-1]["format"] == schema
    assert eng.capabilities.grammar_kinds == ("json_schema",)
    for c in (
        Constraint(kind="yaml_schema", schema_=schema),
        Constraint(kind="grammar", grammar='root ::= "a"'),
        Constraint(kind="regex", pattern="a+"),
        Constraint(kind="choice", choices=["a", "b"]),
    ):
        with pytest.raises(EngineError, match=f"cannot enforce a {c.kind}.*JSON schema"):
            run(make(stub.url), req(constraint=c))


def test_server_down_is_a_clear_message() -> None:
    host = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(EngineError, match=f"Ollama server not reachable at {host}.*ollama serve"):
        run(make(host))


def test_server_gone_mid_run_is_a_recorded_error(stub) -> None:  # type: ignore[no-untyped-def]
    eng = make(stub.url)

    async def go():  # type: ignore[no-untyped-def]
        await eng.load()
        eng.host = f"http://127.0.0.1:{free_port()}"  # as if the server died after load
        g = await eng.chat(req())
        await eng.close()
        return g

    g = asyncio.run(go())
    assert g.error and "not reachable" in g.error and g.text == ""


@pytest.mark.parametrize("answer", [None, (500, {"error": "model 'qwen3:8b-q4_K_M' not found"})])
def test_model_not_pulled(stub, answer) -> None:  # type: ignore[no-untyped-def]
    stub.show_answer = answer  # None: the stub's own 404; else an error body with another status
    with pytest.raises(EngineError, match=r"model not pulled: run `ollama pull qwen3:8b-q4_K_M`"):
        run(make(stub.url, tag="qwen3:8b-q4_K_M"))


def test_model_removed_after_load_is_a_recorded_error(stub) -> None:  # type: ignore[no-untyped-def]
    eng = make(stub.url)

    async def go():  # type: ignore[no-untyped-def]
        await eng.load()
        stub.pulled.clear()
        g = await eng.chat(req())
        await eng.close()
        return g

    g = asyncio.run(go())
    assert g.error and "HTTP 404" in g.error and f"ollama pull {TAG}" in g.error


def test_truncated_prompt_at_num_ctx_is_an_error(stub) -> None:  # type: ignore[no-untyped-def]
    stub.final["prompt_eval_count"] = NUM_CTX
    eng = make(stub.url)
    (g,) = run(eng, req())
    assert g.error and "truncated" in g.error and str(NUM_CTX) in g.error
    assert g.text == "" and g.prompt_tokens == NUM_CTX and eng.counters["truncated_prompts"] == 1


def test_dropped_messages_detected_from_count_far_below_estimate(stub) -> None:  # type: ignore[no-untyped-def]
    stub.final["prompt_eval_count"] = 300  # Ollama kept only the last message of a long conversation
    long_history = [
        Message(role="user", content="lorem ipsum dolor sit amet " * 400),
        Message(role="assistant", content="ok"),
        Message(role="user", content="And now?"),
    ]
    (g,) = run(make(stub.url), ChatRequest(messages=long_history))
    assert g.error and "far below" in g.error and "num_ctx" in g.error
    (ok,) = run(make(stub.url), req("a short question"))
    assert ok.error is None
    # before 0.30, prompt_eval_count left out cached tokens: a low count is normal there
    stub.version = "0.29.1"
    (old,) = run(make(stub.url), ChatRequest(messages=long_history))
    assert old.error is None


def test_mid_stream_error_recorded(stub) -> None:  # type: ignore[no-untyped-def]
    stub.mid_stream_error = "llama runner process has terminated"
    (g,) = run(make(stub.url), req())
    assert g.error and "llama runner process has terminated" in g.error


def test_native_tool_calls_parsed_and_tools_sent(stub) -> None:  # type: ignore[no-untyped-def]
    stub.content = [""]
    stub.tool_calls = [{"function": {"name": "getWeather", "arguments": {"city": "Helsinki"}}}]
    eng = make(stub.url)
    (g,) = run(eng, req("Weather in Helsinki?", tools=TOOLS, tool_mode="native"))
    assert stub.chats()[-1]["tools"] == [{"type": "function", "function": TOOLS[0].model_dump()}]
    assert g.parse_status == "ok" and [(c.name, c.arguments) for c in g.tool_calls] == [
        ("getWeather", {"city": "Helsinki"})
    ]
    assert eng.counters["tool_calls_from_text"] == 0


@pytest.mark.parametrize(
    "content",
    [
        '<tool_call>\n{"name": "getWeather", "arguments": {"city": "Helsinki"}}\n</tool_call>',
        '{"name": "getWeather", "arguments": {"city": "Helsinki"}}',
        '```json\n[{"name": "getWeather", "arguments": "{\\"city\\": \\"Helsinki\\"}"}]\n```',
    ],
)
def test_tool_calls_returned_as_text_detected(stub, content: str) -> None:  # type: ignore[no-untyped-def]
    stub.content = [content[:10], content[10:]]
    eng = make(stub.url)
    (g,) = run(eng, req("Weather in Helsinki?", tools=TOOLS, tool_mode="native"))
    assert g.parse_status == "ok" and [(c.name, c.arguments) for c in g.tool_calls] == [
        ("getWeather", {"city": "Helsinki"})
    ]
    assert eng.counters["tool_calls_from_text"] == 1


def test_broken_text_tool_call_is_a_parse_error(stub) -> None:  # type: ignore[no-untyped-def]
    stub.content = ['<tool_call>{"name": "getWeather", "arguments": {"city": </tool_call>']
    (g,) = run(make(stub.url), req("Weather?", tools=TOOLS, tool_mode="native"))
    assert g.parse_status == "parse_error" and g.tool_calls == []
    stub.content = ["It is sunny."]
    (g,) = run(make(stub.url), req("Weather?", tools=TOOLS, tool_mode="native"))
    assert g.parse_status == "no_call"


def test_vram_from_ps_is_labelled_estimate(stub) -> None:  # type: ignore[no-untyped-def]
    from rig.engines.ollama import VRAM_LABEL

    eng = make(stub.url)

    async def go():  # type: ignore[no-untyped-def]
        await eng.load()
        try:
            return await eng.vram_bytes()
        finally:
            await eng.close()

    assert asyncio.run(go()) == 512_000_000
    assert "estimate" in VRAM_LABEL


def test_non_loopback_host_refused() -> None:
    with pytest.raises(EngineError, match="offline guard"):
        make("http://10.1.2.3:11434")
