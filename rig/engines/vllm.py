"""vLLM in-process async engine (AsyncLLM): many episodes in flight, continuous batching does the work.

Written against vLLM 0.33 (see the engines reference notes): structured outputs via ``StructuredOutputsParams``
(the removed guided-decoding names would be silently ignored by servers), stats logging on so per-request
metrics exist, ``max_tokens`` always explicit (vLLM's default is 16), tool calls parsed by vLLM's own parser for
the model's format with special tokens kept. GPU selection happens before vLLM initialises CUDA.
tests/engines/test_vllm_api.py runs these calls through vLLM's own classes on a CPU (no model loaded).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from rig.engines.base import Capabilities, Engine, EngineError
from rig.records import ChatRequest, Generation, ParsedCall, Timings

_ENGINE_ARGS = {"gpu_memory_utilization", "kv_cache_memory_bytes", "max_num_seqs", "tensor_parallel_size",
                "quantization", "dtype", "enforce_eager", "tokenizer", "enable_prefix_caching", "max_num_batched_tokens"}


# The chat template already wrote BOS; vLLM tokenizes a text prompt as a completion, adding special tokens, so
# Gemma or Llama would see BOS twice (vLLM's own chat endpoint tokenizes rendered chats without them too).
NO_SPECIAL_TOKENS = {"add_special_tokens": False}


class VllmEngine(Engine):
    name = "vllm"

    def __init__(self, spec, weights, *, gpu=None, **options: Any) -> None:  # type: ignore[no-untyped-def]
        super().__init__(spec, weights, gpu=gpu, **options)
        bad = set(spec.engine_args) - _ENGINE_ARGS
        if bad:
            raise EngineError(f"models.yaml entry {spec.name!r}: engine_args {sorted(bad)} not understood by vllm "
                              f"(allowed: {sorted(_ENGINE_ARGS)})")
        self.engine = None
        self.tokenizer = None
        self._parser = None

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(native_tools=True, grammar_kinds=("json_schema", "grammar", "regex", "choice"),
                            continuous_batching=True, max_concurrency=int(self.spec.engine_args.get("max_num_seqs", 64)))

    async def load(self) -> None:
        if self.gpu is not None:
            if "vllm" in __import__("sys").modules:
                raise EngineError("vLLM was imported before --gpu could select the device")
            tp = int(self.spec.engine_args.get("tensor_parallel_size", 1))
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(self.gpu + i) for i in range(tp))
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        args = AsyncEngineArgs(model=self.weights, max_model_len=self.spec.context_length,
                               seed=self.spec.sampling.seed, disable_log_stats=False, **self.spec.engine_args)
        try:
            self.engine = AsyncLLM.from_engine_args(args)
        except Exception as e:
            raise EngineError(f"vLLM could not load {self.weights}: {e}") from None
        self.tokenizer = await _maybe_await(self.engine.get_tokenizer())
        if self.spec.tool_format:
            from vllm.tool_parsers import ToolParserManager

            self._parser = ToolParserManager.get_tool_parser(self.spec.tool_format)(self.tokenizer)

    def _sampling(self, request: ChatRequest):  # type: ignore[no-untyped-def]
        from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

        s, c = request.sampling, request.constraint
        so = None
        if c is not None and self.spec.thinking == "strip":  # the constraint starts after one think block
            from rig.decoding import to_gbnf
            from rig.engines.thinking import allow_thinking_gbnf

            so = StructuredOutputsParams(grammar=allow_thinking_gbnf(to_gbnf(c)))
        elif c is not None:
            if c.kind == "grammar":
                so = StructuredOutputsParams(grammar=c.grammar)
            elif c.kind == "regex":
                so = StructuredOutputsParams(regex=c.pattern)
            elif c.kind == "choice":
                so = StructuredOutputsParams(choice=c.choices)
            else:  # json_schema, yaml_schema: rig's grammar, so vLLM constrains to the same language as
                # llama.cpp (xgrammar's own schema converter allows unbounded whitespace and digit runs)
                from rig.decoding import to_gbnf

                so = StructuredOutputsParams(grammar=to_gbnf(c))
        return SamplingParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k or 0, max_tokens=s.max_tokens,
                              seed=s.seed, stop=s.stop or None, skip_special_tokens=False,
                              structured_outputs=so, output_kind=RequestOutputKind.FINAL_ONLY)

    def render(self, request: ChatRequest) -> str:
        msgs = [m.model_dump(exclude_none=True) for m in request.messages]
        tools = [{"type": "function", "function": t.model_dump()} for t in request.tools] or None
        kwargs = {"enable_thinking": False} if self.spec.thinking == "off" else {}
        return self.tokenizer.apply_chat_template(msgs, tools=tools, add_generation_prompt=True, tokenize=False,
                                                  **kwargs)

    async def chat(self, request: ChatRequest) -> Generation:
        gen = Generation(request_hash=request.digest())
        t0 = time.perf_counter()
        try:
            prompt = self.render(request)
            final = None
            async for out in self.engine.generate(prompt, self._sampling(request), request_id=uuid.uuid4().hex,
                                                  tokenization_kwargs=NO_SPECIAL_TOKENS):
                final = out
            if final is None:
                gen.error = "vLLM returned no output"
                return gen
            o = final.outputs[0]
            gen.text, gen.finish_reason = o.text, o.finish_reason
            if self.spec.thinking == "strip":
                from rig.engines.thinking import strip_thinking

                gen.text = strip_thinking(gen.text)
            gen.prompt_tokens, gen.completion_tokens = len(final.prompt_token_ids), len(o.token_ids)
            gen.cached_prompt_tokens = getattr(final, "num_cached_tokens", None)
            gen.timings = _timings(final.metrics, time.perf_counter() - t0, len(o.token_ids))
            if request.tools and request.tool_mode == "native" and self._parser is not None:
                self._parse_tools(gen, request)
        except Exception as e:
            gen.error = f"{type(e).__name__}: {e}"
            gen.timings.e2e_s = time.perf_counter() - t0
        return gen

    def _parse_tools(self, gen: Generation, request: ChatRequest) -> None:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        import json

        req = ChatCompletionRequest(model=self.spec.name, messages=[m.model_dump(exclude_none=True) for m in
                                                                     request.messages],
                                    tools=[{"type": "function", "function": t.model_dump()} for t in request.tools])
        info = self._parser.extract_tool_calls(gen.text, req)
        if not info.tools_called:
            gen.parse_status = "parse_error" if "<tool_call>" in gen.text else "no_call"
            return
        try:
            gen.tool_calls = [ParsedCall(name=tc.function.name, arguments=json.loads(tc.function.arguments or "{}"))
                              for tc in info.tool_calls]
            gen.parse_status = "ok"
        except (ValueError, TypeError):
            gen.parse_status = "parse_error"

    async def close(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None

    def versions(self) -> dict[str, str]:
        import vllm

        return {"vllm": vllm.__version__}


def _timings(m: Any, wall: float, n_out: int) -> Timings:
    """Engine-side timings when stats logging produced them; the wall clock always."""
    t = Timings(e2e_s=wall)
    if m is None:
        return t
    t.ttft_s = getattr(m, "first_token_latency", None)
    sched, queued = getattr(m, "scheduled_ts", None), getattr(m, "queued_ts", None)
    if sched and queued:
        t.queue_s = sched - queued
    first, last = getattr(m, "first_token_ts", None), getattr(m, "last_token_ts", None)
    if first and last and last > first and n_out > 1:
        t.decode_tps = (n_out - 1) / (last - first)
    return t


async def _maybe_await(x: Any) -> Any:
    import inspect

    return await x if inspect.isawaitable(x) else x
