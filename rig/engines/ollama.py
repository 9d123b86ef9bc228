"""Ollama through its native REST API (``/api/chat``), spoken directly with httpx.

Native rather than Ollama's OpenAI-compatible /v1: only the native API takes ``options.num_ctx`` (unset, Ollama
picks a context from free VRAM) and reports token counts with server-side durations in nanoseconds.

Every call sets num_ctx, temperature, seed, num_predict and top_p explicitly: a model's Modelfile would otherwise
supply its own. Two known Ollama behaviours are checked rather than trusted: prompts that overflow num_ctx are
truncated silently (HTTP 200; the only tell is ``prompt_eval_count``), and some models' tool calls come back as
text in ``content`` instead of ``tool_calls``.
"""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar

import httpx
from pydantic import field_validator

from rig.engines.base import (
    FIRST_SAMPLING,
    Capabilities,
    Engine,
    EngineArgs,
    EngineError,
    NativeCall,
    Reply,
    openai_tools,
)
from rig.engines.server import ClientPerLoop, http_error_message, loopback_url
from rig.records import ChatRequest, Generation, Message
from rig.registry import ModelSpec

DEFAULT_HOST = "http://127.0.0.1:11434"
VRAM_LABEL = "Ollama's estimate (/api/ps size_vram): memory it reserved for the model, not measured usage"


def _version_tuple(v: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in (v or "").split("-")[0].split(".")[:3])
    except ValueError:
        return ()


def _ns(value: Any) -> float | None:
    return value / 1e9 if isinstance(value, (int, float)) and value > 0 else None


class OllamaArgs(EngineArgs):
    host: str = DEFAULT_HOST
    keep_alive: str | int | float = "30m"  # a duration ("30m") or seconds
    max_concurrency: int = 1  # match the server's OLLAMA_NUM_PARALLEL
    request_timeout_s: float = 600.0
    # A prompt of C characters has at least C / max_chars_per_token tokens in any real tokenizer; fewer counted
    # means Ollama dropped messages to fit num_ctx.
    max_chars_per_token: float = 8.0
    preload: bool = True

    @field_validator("host")
    @classmethod
    def _loopback(cls, url: str) -> str:
        return loopback_url(url)


class OllamaEngine(Engine):
    name = "ollama"
    Args = OllamaArgs
    args: OllamaArgs
    SAMPLING: ClassVar[dict[str, str]] = {
        **FIRST_SAMPLING,
        "max_tokens": "num_predict",
        "min_p": "min_p",
        "repeat_penalty": "repeat_penalty",
    }

    def __init__(self, spec: ModelSpec, weights: str, *, gpu: int | None = None) -> None:
        super().__init__(spec, weights, gpu=gpu)
        self.host = self.args.host
        self.tag = weights
        self.server_version: str | None = None
        self.model_details: dict[str, Any] = {}  # /api/show: details, capabilities, context length
        # Per call, until records carry them: server-side seconds (load, prefill, decode, total) by request hash.
        self.server_timings: list[dict[str, Any]] = []
        self.counters["truncated_prompts"] = 0
        self._http: ClientPerLoop | None = None

    @property
    def capabilities(self) -> Capabilities:
        caps = self.model_details.get("capabilities")
        n = self.args.max_concurrency
        return Capabilities(
            native_tools=caps is None or "tools" in caps,
            grammar_kinds=("json_schema",),
            continuous_batching=n > 1,
            max_concurrency=n,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "model_details": self.model_details,
            "counters": self.counters,
            "vram_note": "Ollama /api/ps size_vram is the server's estimate, not measured usage",
        }

    def versions(self) -> dict[str, str]:
        out = {"httpx": httpx.__version__}
        if self.server_version:
            out["ollama-server"] = self.server_version
        return out

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def _down(self, e: Exception) -> EngineError:
        return EngineError(
            f"Ollama server not reachable at {self.host} ({type(e).__name__}: {e}); start it with "
            "`ollama serve`, or set engine_args.host to where it listens"
        )

    async def load(self) -> None:
        self._http = ClientPerLoop(
            self.args.max_concurrency, timeout=httpx.Timeout(self.args.request_timeout_s, connect=10.0)
        )
        client = self._http.client
        try:
            r = await client.get(f"{self.host}/api/version", timeout=10.0)
            self.server_version = r.json().get("version") if r.status_code == 200 else None
            show = await client.post(f"{self.host}/api/show", json={"model": self.tag}, timeout=30.0)
        except httpx.TransportError as e:
            raise self._down(e) from None
        except ValueError:
            raise EngineError(
                f"{self.host} answers, but not like an Ollama server (/api/version is not JSON); check engine_args.host"
            ) from None
        if show.status_code == 404 or "not found" in http_error_message(show).lower():
            raise EngineError(
                f"model not pulled: run `ollama pull {self.tag}` (Ollama at {self.host} answered "
                f"/api/show with HTTP {show.status_code}: {http_error_message(show)})"
            )
        if show.status_code != 200:
            raise EngineError(f"Ollama /api/show {self.tag!r}: HTTP {show.status_code}: {http_error_message(show)}")
        info = show.json()
        ctx = next((v for k, v in (info.get("model_info") or {}).items() if k.endswith(".context_length")), None)
        self.model_details = {
            "details": info.get("details") or {},
            "capabilities": info.get("capabilities"),
            "context_length": ctx,
        }
        if self.args.preload:
            # An empty chat loads the model with this num_ctx, so the first timed call does not pay for it.
            body = {
                "model": self.tag,
                "messages": [],
                "stream": False,
                "keep_alive": self.args.keep_alive,
                "options": {"num_ctx": self.spec.context_length},
            }
            try:
                r = await client.post(f"{self.host}/api/chat", json=body)
            except httpx.TransportError as e:
                raise self._down(e) from None
            if r.status_code != 200:
                raise EngineError(f"Ollama could not load {self.tag!r}: HTTP {r.status_code}: {http_error_message(r)}")

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def device_placement(self) -> str | None:
        return (
            f"the model runs in the Ollama server at {self.host}, which rig does not start and which chooses its "
            "own device (its CUDA_VISIBLE_DEVICES is the server's, set where it was started)"
        )

    async def vram_bytes(self) -> int | None:
        """``size_vram`` of this model from /api/ps: Ollama's estimate (see VRAM_LABEL), None if not loaded."""
        assert self._http is not None, "engine not loaded"
        try:
            r = await self._http.client.get(f"{self.host}/api/ps", timeout=10.0)
        except httpx.TransportError:
            return None
        if r.status_code != 200:
            return None
        names = {self.tag, self.tag if ":" in self.tag else f"{self.tag}:latest"}
        for m in r.json().get("models") or []:
            if m.get("name") in names or m.get("model") in names:
                return m.get("size_vram")
        return None

    # -- chat --------------------------------------------------------------------------------------------------

    @staticmethod
    def _message(m: Message) -> dict[str, Any]:
        out: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.role == "tool" and m.name:
            out["tool_name"] = m.name  # Ollama matches tool results by name
        return out

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        options: dict[str, Any] = {"num_ctx": self.spec.context_length, **self.sampling_args(request.sampling)}
        # truncate/shift false: newer servers then fail an overflowing prompt instead of cutting it silently.
        body: dict[str, Any] = {
            "model": self.tag,
            "messages": [self._message(m) for m in request.messages],
            "stream": True,
            "options": options,
            "keep_alive": self.args.keep_alive,
            "truncate": False,
            "shift": False,
        }
        if self.spec.thinking == "off":
            body["think"] = False
        if request.tool_mode == "native" and request.tools:
            body["tools"] = openai_tools(request.tools)
        c = request.constraint
        if c is not None:
            if c.kind != "json_schema":
                raise EngineError(
                    f"Ollama cannot enforce a {c.kind} constraint: its API constrains output only "
                    "through `format`, a JSON schema. Use JSON decoding, or the llamacpp / vllm engine "
                    "for grammar, regex, choice or YAML constraints"
                )
            body["format"] = c.schema_
        return body

    async def generate(self, request: ChatRequest) -> Reply:
        if self._http is None:
            raise EngineError("engine not loaded")
        body = self._body(request)  # an unservable constraint raises here, before any work
        async with self._http.call(request) as (reply, t0):
            got = await self._stream(body, reply.generation, t0)
            if got is not None:
                final, calls = got
                self._read_final(reply.generation, final, request, "tools" in body)
                reply.calls = calls
        return reply

    async def _stream(
        self, body: dict[str, Any], gen: Generation, t0: float
    ) -> tuple[dict[str, Any], list[NativeCall]] | None:
        """Stream NDJSON chunks into ``gen``; return the final (``done``) chunk and the tool calls, or None after an
        error."""
        assert self._http is not None
        url = f"{self.host}/api/chat"
        parts: list[str] = []
        calls: list[NativeCall] = []
        final: dict[str, Any] | None = None
        try:
            async with self._http.client.stream("POST", url, json=body) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    hint = f"; model not pulled? run `ollama pull {self.tag}`" if resp.status_code == 404 else ""
                    gen.error = f"Ollama HTTP {resp.status_code} from {url}: {http_error_message(resp)}{hint}"
                    return None
                async for line in resp.aiter_lines():
                    if not line.strip():
                        continue
                    chunk = json.loads(line)
                    if chunk.get("error"):
                        gen.error = f"Ollama error mid-stream: {chunk['error']}"
                        return None
                    msg = chunk.get("message") or {}
                    token = msg.get("content") or msg.get("thinking") or msg.get("tool_calls")
                    if token and gen.timings.ttft_s is None:
                        gen.timings.ttft_s = time.perf_counter() - t0
                    parts.append(msg.get("content") or "")
                    for tc in msg.get("tool_calls") or []:
                        fn = tc.get("function") or {}
                        calls.append((fn.get("name") or "", fn.get("arguments")))
                    if chunk.get("done"):
                        final = chunk
                        break
        except httpx.TimeoutException as e:
            gen.error = (
                f"request to Ollama at {self.host} timed out after {self.args.request_timeout_s:g} s "
                f"({type(e).__name__})"
            )
            return None
        except httpx.TransportError as e:
            gen.error = str(self._down(e))
            return None
        gen.timings.e2e_s = time.perf_counter() - t0
        if final is None:
            gen.error = "Ollama closed the stream without a final (done) chunk"
            return None
        gen.text = "".join(parts)
        return final, calls

    def _read_final(self, gen: Generation, final: dict[str, Any], request: ChatRequest, want_tools: bool) -> None:
        gen.finish_reason = final.get("done_reason")
        gen.prompt_tokens = final.get("prompt_eval_count")
        gen.completion_tokens = final.get("eval_count")
        eval_s = _ns(final.get("eval_duration"))
        if gen.completion_tokens and eval_s:
            gen.timings.decode_tps = gen.completion_tokens / eval_s  # Ollama's own tokens/s definition
        gen.timings.load_s = _ns(final.get("load_duration"))
        gen.timings.prefill_s = _ns(final.get("prompt_eval_duration"))
        self.server_timings.append(
            {
                "request_hash": gen.request_hash,
                "load_s": _ns(final.get("load_duration")),
                "prompt_eval_s": _ns(final.get("prompt_eval_duration")),
                "eval_s": eval_s,
                "total_s": _ns(final.get("total_duration")),
            }
        )
        truncated = self._truncation(gen.prompt_tokens, request, want_tools)
        if truncated:
            self.counters["truncated_prompts"] += 1
            gen.error, gen.text = truncated, ""  # an answer to a cut prompt is not a result

    def _truncation(self, counted: int | None, request: ChatRequest, want_tools: bool) -> str | None:
        if counted is None:
            return None
        num_ctx = self.spec.context_length
        if counted >= num_ctx:
            return (
                f"prompt truncated by Ollama: prompt_eval_count {counted} reached num_ctx {num_ctx} "
                "(raise context_length in models.yaml or shorten the prompt)"
            )
        # Before 0.30 prompt_eval_count left out cached prompt tokens, so a low count proves nothing there.
        if self.server_version and _version_tuple(self.server_version) < (0, 30):
            return None
        chars = sum(len(m.content) for m in request.messages)
        if want_tools:
            chars += len(json.dumps([t.model_dump() for t in request.tools]))
        floor = chars / self.args.max_chars_per_token
        if counted < floor:
            return (
                f"prompt truncated by Ollama: prompt_eval_count {counted} is far below the at least {floor:.0f} "
                f"tokens expected for {chars} characters; Ollama dropped messages to fit num_ctx {num_ctx} "
                "(raise context_length in models.yaml)"
            )
        return None
