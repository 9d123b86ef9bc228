"""Any local OpenAI-style server: ``vllm serve``, ``python -m llama_cpp.server``, LM Studio, Ollama's /v1.

Attach to a running server (engine_args ``base_url``) or start one (``spawn``: a command list in which ``{weights}``,
``{port}``, ``{host}``, ``{context_length}`` and ``{python}`` are substituted); loopback only either way.

Servers differ in what they accept beyond the common core, and several silently ignore fields they do not know
(HTTP 200, unconstrained output). So ``load`` probes instead of assuming: whether the stream carries a usage chunk,
and which constraint transport is actually enforced, by asking for a string the model would never produce unforced.
The findings are in ``usage_source`` and ``constraint_modes`` and belong in the run manifest.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import httpx
from pydantic import field_validator, model_validator

from rig.decoding.constraint import Constraint
from rig.engines.base import (
    FIRST_SAMPLING,
    Capabilities,
    Engine,
    EngineArgs,
    EngineError,
    Reply,
    openai_messages,
    openai_tools,
)
from rig.engines.server import ClientPerLoop, LocalServer, free_port, http_error_message, loopback_url
from rig.records import ChatRequest, Generation
from rig.registry import ModelSpec

# Probe payloads: output the model would not produce unless the constraint is enforced.
_PROBE_SCHEMA = {
    "type": "object",
    "properties": {"rig": {"type": "string", "enum": ["zq7"]}},
    "required": ["rig"],
    "additionalProperties": False,
}
_PROBE_JSON = '{"rig":"zq7"}'
_PROBE_GBNF = 'root ::= "zq7"'
_PROBE_MESSAGES = [{"role": "user", "content": "Say hello."}]


def _gbnf(c: Constraint) -> str:
    if c.kind == "grammar":
        return c.grammar or ""
    from rig.decoding import to_gbnf

    return to_gbnf(c)


# Constraint transport name -> request fields. Names are recorded as detected, so they say what was sent.
_TRANSPORTS: dict[str, Any] = {
    "response_format.json_schema": lambda c: {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": c.schema_, "strict": True},
        }
    },
    "structured_outputs.json": lambda c: {"structured_outputs": {"json": c.schema_}},
    "response_format.json_object": lambda c: {"response_format": {"type": "json_object", "schema": c.schema_}},
    "grammar": lambda c: {"grammar": _gbnf(c)},
    "structured_outputs.grammar": lambda c: {"structured_outputs": {"grammar": _gbnf(c)}},
    "structured_outputs.choice": lambda c: {"structured_outputs": {"choice": c.choices}},
    "structured_outputs.regex": lambda c: {"structured_outputs": {"regex": c.pattern}},
}


@dataclass
class _Streamed:
    usage: dict[str, Any] | None = None
    first: float | None = None  # perf_counter of the first and last token-bearing deltas
    last: float | None = None
    calls: list[tuple[str, str]] | None = None  # native tool calls as (name, raw arguments)


class OpenAICompatArgs(EngineArgs):
    base_url: str | None = None  # attach to a running server ...
    spawn: list[str] | None = None  # ... or start one with this command
    ready_timeout_s: float = 300.0
    stop_grace_s: float = 10.0
    request_timeout_s: float = 600.0
    max_concurrency: int = 1
    api_key: str | None = None  # $VARS expanded when sent
    model: str | None = None  # unset: the served name in weights, else the one model a spawned server lists
    usage_fallback: Literal["nonstream", "none"] = "nonstream"

    @field_validator("base_url")
    @classmethod
    def _loopback(cls, url: str | None) -> str | None:
        return None if url is None else loopback_url(url)

    @field_validator("spawn", mode="before")
    @classmethod
    def _argv(cls, spawn: Any) -> Any:
        if spawn is not None and (
            not isinstance(spawn, list) or not spawn or not all(isinstance(x, (str, int, float)) for x in spawn)
        ):
            raise ValueError("must be a non-empty list of strings")
        return None if spawn is None else [str(x) for x in spawn]

    @model_validator(mode="after")
    def _attach_or_spawn(self) -> OpenAICompatArgs:
        if (self.base_url is None) == (self.spawn is None):
            raise ValueError(
                "openai_compat needs exactly one of engine_args.base_url (attach to a running server) "
                "or engine_args.spawn (a command list that starts one)"
            )
        return self


class OpenAICompatEngine(Engine):
    name = "openai_compat"
    Args = OpenAICompatArgs
    args: OpenAICompatArgs
    # OpenAI's names; min_p as vLLM, SGLang and llama_cpp.server take it (a repeat penalty has no name they share)
    SAMPLING: ClassVar[dict[str, str]] = {**FIRST_SAMPLING, "min_p": "min_p"}

    def __init__(self, spec: ModelSpec, weights: str, *, gpu: int | None = None) -> None:
        super().__init__(spec, weights, gpu=gpu)
        self.base_url = self.args.base_url  # a spawned server's URL once started
        self.server: LocalServer | None = None
        self.model_id: str | None = None
        self.server_version: str | None = None
        # Detected at load:
        self.usage_source: str | None = None  # "stream" | "nonstream" | "none"
        self.constraint_modes: dict[str, str] = {}  # constraint kind -> transport name (_TRANSPORTS)
        self.probe_log: list[str] = []  # why each probe failed, for the manifest and for debugging
        self.counters["usage_mismatch"] = 0
        self._stream_options = True
        self._http: ClientPerLoop | None = None

    @property
    def capabilities(self) -> Capabilities:
        n = self.args.max_concurrency
        return Capabilities(
            native_tools=True,
            grammar_kinds=tuple(sorted(self.constraint_modes)),
            continuous_batching=n > 1,
            max_concurrency=n,
        )

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def _spawn_argv(self, port: int) -> list[str]:
        subs = {
            "weights": self.weights,
            "port": str(port),
            "host": "127.0.0.1",
            "context_length": str(self.spec.context_length),
            "python": sys.executable,
        }
        argv = []
        for x in self.args.spawn or []:
            for k, v in subs.items():  # not str.format: an argument may hold literal braces (inline JSON config)
                x = x.replace("{" + k + "}", v)
            argv.append(x)
        # A bare "python" means this environment's interpreter: the server package is installed beside rig.
        if argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        return argv

    async def load(self) -> None:
        key = self.args.api_key
        headers = {"Authorization": f"Bearer {os.path.expandvars(key)}"} if key else {}
        self._http = ClientPerLoop(
            self.args.max_concurrency, headers=headers, timeout=httpx.Timeout(self.args.request_timeout_s, connect=10.0)
        )
        try:
            if self.args.spawn is not None:
                port = free_port()
                self.server = LocalServer(
                    self._spawn_argv(port),
                    env=self.device_env(),
                    port=port,
                    name="openai_compat server",
                    ready_timeout_s=self.args.ready_timeout_s,
                    stop_grace_s=self.args.stop_grace_s,
                )
                await self.server.start()
                self.base_url = self.server.url
            await self._discover_model()
            await self._probe_usage()
            await self._probe_constraints()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self.server is not None:
            await self.server.stop()

    def device_placement(self) -> str | None:
        if self.args.spawn is not None:
            return None  # the spawned server gets CUDA_VISIBLE_DEVICES narrowed to --gpu's device (device_env)
        return (
            f"the model runs in a server at {self.args.base_url} that rig attached to and did not start, so rig "
            "cannot choose its device; start it on that device, or let rig start it (engine_args.spawn)"
        )

    def describe(self) -> dict[str, Any]:
        return {
            "usage_source": self.usage_source,
            "constraint_modes": self.constraint_modes,
            "probe_log": self.probe_log,
            "counters": self.counters,
        }

    def versions(self) -> dict[str, str]:
        out = {"httpx": httpx.__version__}
        if self.server_version:
            out["openai_compat-server"] = self.server_version
        return out

    async def _discover_model(self) -> None:
        assert self._http is not None
        client = self._http.client
        try:
            r = await client.get(f"{self.base_url}/v1/models", timeout=30.0)
        except httpx.TransportError as e:
            raise EngineError(
                f"no OpenAI-compatible server answering at {self.base_url} ({type(e).__name__}: {e}); "
                "start it first or use engine_args.spawn"
            ) from None
        if r.status_code != 200:
            raise EngineError(f"GET {self.base_url}/v1/models: HTTP {r.status_code}: {http_error_message(r)}")
        ids = [m.get("id") for m in r.json().get("data", []) if isinstance(m, dict)]
        wanted = self.args.model or (self.weights if self.spec.weights.kind == "served" else None)
        if wanted is None:
            if not ids:
                raise EngineError(f"{self.base_url}/v1/models lists no model")
            wanted = ids[0]  # a spawned server serves the one model it was started with
        elif wanted not in ids:
            raise EngineError(f"model {wanted!r} is not served at {self.base_url}; it serves: {ids}")
        self.model_id = wanted
        try:  # vLLM answers /version; others 404, which is fine
            v = await client.get(f"{self.base_url}/version", timeout=10.0)
            if v.status_code == 200 and isinstance(v.json(), dict):
                self.server_version = str(v.json().get("version"))
        except (httpx.HTTPError, ValueError):
            pass

    # -- probes ------------------------------------------------------------------------------------------------

    def _base_body(self, messages: list[dict[str, Any]], max_tokens: int, *, stream: bool) -> dict[str, Any]:
        s = self.spec.sampling
        body: dict[str, Any] = {
            "model": self.model_id,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
            "stream": stream,
        }
        if stream and self._stream_options:
            body["stream_options"] = {"include_usage": True}
        if self.template_kwargs:
            body["chat_template_kwargs"] = self.template_kwargs  # vLLM/SGLang; ignored by others
        return body

    async def _probe_usage(self) -> None:
        body = self._base_body(_PROBE_MESSAGES, 4, stream=True)
        gen = Generation(request_hash="probe")
        got = await self._stream(body, gen, time.perf_counter())
        if gen.error and "stream_options" in gen.error:  # a strict server that rejects the field
            self._stream_options = False
            gen = Generation(request_hash="probe")
            got = await self._stream(self._base_body(_PROBE_MESSAGES, 4, stream=True), gen, time.perf_counter())
        if gen.error:
            raise EngineError(f"the server at {self.base_url} could not answer a chat request: {gen.error}")
        if got.usage and got.usage.get("completion_tokens") is not None:
            self.usage_source = "stream"
            return
        self.usage_source = "none"
        if self.args.usage_fallback == "nonstream":
            r = await self._post(self._base_body(_PROBE_MESSAGES, 4, stream=False))
            if r.status_code == 200 and (r.json().get("usage") or {}).get("completion_tokens") is not None:
                self.usage_source = "nonstream"

    async def _probe(self, transport: str, c: Constraint, expect: str) -> bool:
        try:
            fields = _TRANSPORTS[transport](c)
        except Exception as e:  # e.g. no GBNF converter for this kind
            self.probe_log.append(f"{transport}: {type(e).__name__}: {e}")
            return False
        body = self._base_body(_PROBE_MESSAGES, 24, stream=False) | fields
        r = await self._post(body)
        if r.status_code != 200:
            self.probe_log.append(f"{transport}: HTTP {r.status_code}: {http_error_message(r)[:200]}")
            return False
        msg = (r.json().get("choices") or [{}])[0].get("message") or {}
        got = "".join(str(msg.get("content") or "").split())
        if got != expect:
            self.probe_log.append(f"{transport}: accepted but not enforced (answered {got[:60]!r})")
            return False
        return True

    async def _first(self, transports: list[str], c: Constraint, expect: str) -> str | None:
        for t in transports:
            if await self._probe(t, c, expect):
                return t
        return None

    async def _probe_constraints(self) -> None:
        schema_c = Constraint(kind="json_schema", schema_=_PROBE_SCHEMA)
        modes: dict[str, str] = {}
        grammar = await self._first(
            ["grammar", "structured_outputs.grammar"], Constraint(kind="grammar", grammar=_PROBE_GBNF), "zq7"
        )
        if grammar:
            modes["grammar"] = grammar
        json_t = await self._first(["response_format.json_schema", "structured_outputs.json"], schema_c, _PROBE_JSON)
        gbnf_ok = grammar is not None
        if json_t is None and gbnf_ok:
            # rig's own schema->GBNF beats llama_cpp.server's json_object schema, which silently falls back to
            # unconstrained JSON on schemas it cannot convert; it is also what the in-process engine uses.
            json_t = grammar
        if json_t is None:
            json_t = await self._first(["response_format.json_object"], schema_c, _PROBE_JSON)
        if json_t:
            modes["json_schema"] = json_t
        if gbnf_ok:
            modes["yaml_schema"] = grammar  # type: ignore[assignment]
        if (json_t or "").startswith("structured_outputs") or (grammar or "").startswith("structured_outputs"):
            if await self._probe("structured_outputs.choice", Constraint(kind="choice", choices=["zq7"]), "zq7"):
                modes["choice"] = "structured_outputs.choice"
            if await self._probe("structured_outputs.regex", Constraint(kind="regex", pattern="zq7"), "zq7"):
                modes["regex"] = "structured_outputs.regex"
        for kind in ("choice", "regex"):  # rig.decoding turns both into GBNF (regex: a documented subset)
            if kind not in modes and gbnf_ok:
                modes[kind] = grammar  # type: ignore[assignment]
        self.constraint_modes = modes

    # -- chat --------------------------------------------------------------------------------------------------

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        assert self._http is not None
        try:
            return await self._http.client.post(f"{self.base_url}/v1/chat/completions", json=body)
        except httpx.TransportError as e:
            raise EngineError(self._transport_message(e)) from None

    def _transport_message(self, e: Exception) -> str:
        if isinstance(e, httpx.TimeoutException):
            return f"request to {self.base_url} timed out after {self.args.request_timeout_s:g} s ({type(e).__name__})"
        msg = f"server at {self.base_url} not reachable ({type(e).__name__}: {e})"
        if self.server is not None and self.server.proc is not None and not self.server.running():
            msg += f"; the spawned server exited with code {self.server.proc.returncode}:\n{self.server.output_tail(8)}"
        return msg

    def _request_body(self, request: ChatRequest) -> dict[str, Any]:
        s = request.sampling
        body = self._base_body(openai_messages(request.messages), s.max_tokens, stream=True)
        body.update(self.sampling_args(s))
        if request.tool_mode == "native" and request.tools:
            body["tools"] = openai_tools(request.tools)
        c = request.constraint
        if c is not None:
            mode = self.constraint_modes.get(c.kind)
            if mode is None:
                raise EngineError(
                    f"the server at {self.base_url} cannot enforce a {c.kind} constraint: at load it enforced "
                    f"{self.constraint_modes or 'no constraint transport'} (probes: {'; '.join(self.probe_log)}). "
                    "Run without this decode mode or use an engine that supports it."
                )
            try:
                body.update(_TRANSPORTS[mode](c))
            except (ImportError, ValueError, NotImplementedError) as e:  # e.g. a schema keyword GBNF cannot enforce
                raise EngineError(f"cannot express this {c.kind} constraint for the server ({mode}): {e}") from None
        return body

    async def generate(self, request: ChatRequest) -> Reply:
        if self.model_id is None or self._http is None:
            raise EngineError("engine not loaded")
        body = self._request_body(request)  # an unservable constraint raises here, before any work
        async with self._http.call(request) as (reply, t0):
            gen = reply.generation
            got = await self._stream(body, gen, t0)
            if gen.error is None and got.usage is None and self.usage_source == "nonstream":
                got.usage = await self._usage_by_replay(body, gen, got)
            self._count(gen, got.usage)
            reply.calls = list(got.calls or [])
            reply.decode_s = (got.last - got.first) if got.first and got.last else None
        return reply

    async def _stream(self, body: dict[str, Any], gen: Generation, t0: float) -> _Streamed:
        """Run one streamed request into ``gen`` (text, finish reason, ttft, e2e); tool calls into the result."""
        assert self._http is not None
        url = f"{self.base_url}/v1/chat/completions"
        parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        out = _Streamed()
        try:
            async with self._http.client.stream("POST", url, json=body) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    gen.error = f"HTTP {resp.status_code} from {url}: {http_error_message(resp)}"
                    return out
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("error"):
                        err = chunk["error"]
                        err = err.get("message", err) if isinstance(err, dict) else err
                        gen.error = f"server error mid-stream: {err}"
                        break
                    if chunk.get("usage"):
                        out.usage = chunk["usage"]
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        if (
                            delta.get("content")
                            or delta.get("tool_calls")
                            or delta.get("reasoning_content")
                            or delta.get("reasoning")
                        ):
                            out.last = time.perf_counter()
                            out.first = out.first or out.last
                        if delta.get("content"):
                            parts.append(delta["content"])
                        for i, tc in enumerate(delta.get("tool_calls") or []):
                            slot = calls.setdefault(tc.get("index", i), {"name": "", "arguments": ""})
                            fn = tc.get("function") or {}
                            slot["name"] += fn.get("name") or ""
                            a = fn.get("arguments")
                            slot["arguments"] += a if isinstance(a, str) else json.dumps(a) if a else ""
                        if choice.get("finish_reason"):
                            gen.finish_reason = choice["finish_reason"]
        except httpx.TransportError as e:
            gen.error = self._transport_message(e)
            return out
        end = time.perf_counter()
        if gen.error is None and gen.finish_reason is None:
            # A reply cut short must not pass for a whole one. llama_cpp.server ends a streaming reply this way
            # when another request arrives (its interrupt_requests setting, on by default).
            gen.error = (
                "the server ended the stream without a finish_reason (cut short; python -m llama_cpp.server "
                "does this when requests overlap unless started with --interrupt_requests False)"
            )
        gen.text = "".join(parts)
        gen.timings.ttft_s = out.first - t0 if out.first else None
        gen.timings.e2e_s = end - t0
        out.calls = [(c["name"], c["arguments"]) for _, c in sorted(calls.items())]
        return out

    async def _usage_by_replay(self, body: dict[str, Any], gen: Generation, got: _Streamed) -> dict[str, Any] | None:
        """The server streams no usage (llama_cpp.server): repeat the call unstreamed. The prompt count holds either
        way; the completion count only if the replay produced the same text. Greedy output can differ: llama.cpp
        evaluates a fully cached prompt's last token alone, and batch-1 logits differ slightly from batched ones."""
        plain = {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}
        r = await self._post(plain)
        if r.status_code != 200:
            return None
        data = r.json()
        usage = dict(data.get("usage") or {})
        msg = (data.get("choices") or [{}])[0].get("message") or {}
        calls = [
            ((c.get("function") or {}).get("name") or "", (c.get("function") or {}).get("arguments") or "")
            for c in msg.get("tool_calls") or []
        ]
        if (msg.get("content") or "") != gen.text or calls != (got.calls or []):
            self.counters["usage_mismatch"] += 1
            usage.pop("completion_tokens", None)
        return usage

    @staticmethod
    def _count(gen: Generation, usage: dict[str, Any] | None) -> None:
        if usage:
            gen.prompt_tokens = usage.get("prompt_tokens")
            gen.completion_tokens = usage.get("completion_tokens")
            details = usage.get("prompt_tokens_details") or {}
            gen.cached_prompt_tokens = details.get("cached_tokens")
