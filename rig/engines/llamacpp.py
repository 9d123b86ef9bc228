"""llama.cpp in-process through llama-cpp-python.

One ``Llama`` object serves the whole run, so consecutive prompts that share a prefix (a CallNavi domain's
API list) re-evaluate only their tail. Generation runs over token ids (``Llama.generate``) rather than
``create_chat_completion``: that gives exact prompt and completion token counts, the time of the first
sampled token, and decode speed without relying on ``verbose``-dependent perf counters.
llama.cpp cannot batch requests in-process, so calls are serialised behind a lock. Decode threads default to
the physical cores the process may use (``physical_cores``); ``engine_args.n_threads`` overrides, and the
manifest's engine info records what ran.

Constraints are applied by llama.cpp's own GBNF sampler (``constraint_backend: native``, the default; checked
lazily under greedy decoding, see ``llamacpp_grammar``; ``grammar_mask: full`` masks every step) or, with
``engine_args: {constraint_backend: outlines}`` in models.yaml, by an Outlines logits processor over the same
rig grammar (``rig.decoding.outlines_backend``); prompt rendering, token counts, timings and prefix reuse are
the same either way.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from rig.decoding.constraint import Constraint
from rig.engines.base import (
    OWN_CODE,
    Capabilities,
    Engine,
    EngineArgs,
    EngineError,
    Reply,
    openai_messages,
    openai_tools,
)
from rig.engines.llamacpp_grammar import LazyGrammar
from rig.records import ChatRequest, Generation, Sampling, Timings
from rig.registry import ModelSpec
from rig.telemetry.gpu import visible_devices


def physical_cores(cpus: set[int] | None = None, sysfs: Path = Path("/sys/devices/system/cpu")) -> int:
    """Physical cores among the CPUs this process may run on.

    llama-cpp-python decodes on half the logical CPUs, which is the physical cores only on machines with two
    hardware threads per core; a small VM without SMT gets half its cores (1 of 2 decodes 1.7x slower here).
    Where the topology cannot be read, every allowed CPU counts as a core.
    """
    cpus = cpus if cpus is not None else set(os.sched_getaffinity(0))
    cores = set()
    for cpu in cpus:
        try:
            cores.add((sysfs / f"cpu{cpu}/topology/thread_siblings_list").read_text().strip())
        except OSError:
            cores.add(str(cpu))
    return max(len(cores), 1)


# llama.cpp's native log lines (model load, KV cache notes) go to the "rig.native" logger, never to the terminal:
# `rig bench` writes that logger to the run folder's engine.log. llama-cpp-python's own callback prints llama.cpp
# warnings to stderr even with verbose=False (it maps ggml's WARN level to ERROR).
native_log = logging.getLogger("rig.native")
T = TypeVar("T")
_GGML_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}  # ggml_log_level; 5 = cont.
_log_state: dict[str, Any] = {"callback": None, "level": logging.INFO}


def route_native_logs() -> None:
    """Install (once) a llama.cpp log callback that forwards every line to `native_log`."""
    if _log_state["callback"] is not None:
        return
    import llama_cpp

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        lvl = _log_state["level"] if level == 5 else _GGML_LEVELS.get(level, logging.INFO)
        _log_state["level"] = lvl
        line = text.decode("utf-8", "replace").rstrip("\n")
        if line:
            native_log.log(lvl, "%s", line)

    native_log.propagate = False  # the run's log file handler is attached here, not to the root logger's stderr
    if not native_log.handlers:
        native_log.addHandler(logging.NullHandler())
    _log_state["callback"] = forward  # kept alive: llama.cpp holds only the C pointer
    llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))


class LlamaCppArgs(EngineArgs):
    # Passed through to Llama() when set.
    n_batch: int | None = None
    n_ubatch: int | None = None
    n_threads: int | None = None  # unset: physical_cores()
    n_threads_batch: int | None = None
    flash_attn: bool | None = None
    use_mmap: bool | None = None
    use_mlock: bool | None = None
    type_k: int | None = None
    type_v: int | None = None
    offload_kqv: bool | None = None
    rope_freq_base: float | None = None
    rope_freq_scale: float | None = None
    # Read by rig itself.
    constraint_backend: Literal["native", "outlines"] = "native"
    # native backend: "lazy" checks a greedy step's best token first (see llamacpp_grammar); "full" masks every step.
    grammar_mask: Literal["lazy", "full"] = "lazy"

    def llama_kwargs(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True, exclude={"constraint_backend", "grammar_mask"})


class LlamaCppEngine(Engine):
    name = "llamacpp"
    Args = LlamaCppArgs
    args: LlamaCppArgs
    # max_tokens, seed and stop: the decode loop's own (a token budget, set_seed, stop strings cut from the text)
    SAMPLING: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("max_tokens", "seed", "stop"), OWN_CODE),
        "temperature": "temp",
        "top_p": "top_p",
        "top_k": "top_k",
        "min_p": "min_p",
        "repeat_penalty": "repeat_penalty",
    }

    @classmethod
    def check_args(cls, args: Any, spec: ModelSpec) -> None:
        if args.constraint_backend == "outlines":
            from rig.decoding.outlines_backend import OutlinesUnavailable, require_outlines

            try:
                require_outlines()
            except OutlinesUnavailable as e:
                raise EngineError(
                    f"models.yaml entry {spec.name!r}: engine_args.constraint_backend outlines: {e}"
                ) from None

    def __init__(self, spec: ModelSpec, weights: str, *, gpu: int | None = None) -> None:
        super().__init__(spec, weights, gpu=gpu)
        self._outlines: Any = None  # OutlinesConstraints, built at load
        self.served = {"native": 0, "outlines": 0}  # constrained requests per backend
        self.llm: Any = None  # llama_cpp.Llama once loaded
        self.threads: dict[str, int] = {}  # what llama.cpp runs with, for the manifest
        self._formatter: Any = None
        self._lock = threading.Lock()
        self._native_thread: ThreadPoolExecutor | None = None  # where every llama.cpp call runs (see _native)
        # What the chat template renders, probed at load (see _probe_template).
        self.template = {"system": True, "tool_role": True, "tools": False}

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            native_tools=self.template["tools"],
            grammar_kinds=("json_schema", "grammar", "choice", "yaml_schema"),
            continuous_batching=False,
            max_concurrency=1,
        )

    async def _native(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` on the engine's one thread. llama.cpp's CPU backend is built with OpenMP, and libgomp keeps a
        team of worker threads for every thread that starts parallel work; once the process holds more of those
        threads than there are CPUs, libgomp stops spin-waiting at its barriers (hundreds per token) and sleeps in the
        kernel instead. Calls spread over asyncio's default executor (two of its threads in a plain `rig bench`)
        made a second team and slowed decoding; one thread keeps one team, as a bare llama-cpp-python loop has. (On a
        host shared with other busy processes spinning is what hurts: OMP_WAIT_POLICY=passive in the environment turns
        it off, for rig and llama.cpp alike.) Calls also run in the order given, so ``close`` waits for a call still
        running."""
        if self._native_thread is None:
            self._native_thread = ThreadPoolExecutor(1, thread_name_prefix="rig-llamacpp")
        return await asyncio.get_running_loop().run_in_executor(self._native_thread, fn, *args)

    async def load(self) -> None:
        await self._native(self._load_sync)

    def gpu_kwargs(self) -> dict[str, Any]:
        """How ``Llama`` is told which device to use: ``main_gpu`` is a CUDA device ordinal, which is already a
        position in CUDA_VISIBLE_DEVICES, the meaning ``--gpu`` has for every engine; checked against that list
        here, before anything loads."""
        import llama_cpp

        if self.gpu is None:
            return {"n_gpu_layers": 0}
        if not llama_cpp.llama_supports_gpu_offload():
            raise EngineError(
                "--gpu given, but this llama-cpp-python build has no GPU support "
                "(reinstall with CMAKE_ARGS='-DGGML_CUDA=on')"
            )
        try:
            visible_devices(self.gpu)
        except ValueError as e:
            raise EngineError(str(e)) from None
        return {"n_gpu_layers": -1, "split_mode": llama_cpp.LLAMA_SPLIT_MODE_NONE, "main_gpu": self.gpu}

    def device_placement(self) -> str | None:
        return None  # gpu_kwargs: main_gpu

    def _load_sync(self) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        route_native_logs()
        kwargs = self.args.llama_kwargs()
        kwargs.setdefault("n_threads", physical_cores())
        kwargs.update(self.gpu_kwargs())
        try:
            self.llm = Llama(
                model_path=self.weights,
                n_ctx=self.spec.context_length,
                seed=self.spec.sampling.seed,
                verbose=False,
                **kwargs,
            )
        except (ValueError, RuntimeError) as e:
            raise EngineError(f"llama.cpp could not load {self.weights}: {e}") from None
        self.threads = {"decode": self.llm.n_threads, "batch": self.llm.n_threads_batch}
        self._formatter = self._resolve_formatter(Jinja2ChatFormatter)
        self._probe_template()
        if self.args.constraint_backend == "outlines":
            from rig.decoding.outlines_backend import OutlinesConstraints, OutlinesUnavailable

            try:
                self._outlines = OutlinesConstraints(self.llm)
            except OutlinesUnavailable as e:
                self.llm.close()
                self.llm = None
                raise EngineError(
                    f"models.yaml entry {self.spec.name!r}: engine_args.constraint_backend outlines: {e}"
                ) from None

    def attach(self, llm: Any) -> None:
        """Render prompts with an already loaded ``Llama`` (the divergence scorer's) instead of loading the weights a
        second time; the template is resolved and probed as at load."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.llm = llm
        self._formatter = self._resolve_formatter(Jinja2ChatFormatter)
        self._probe_template()

    def _probe_template(self) -> None:
        """Find out which message kinds the template silently drops (llama-cpp-python's ``gemma`` format drops
        system and tool messages and ignores tool definitions), so ``render`` can fold them into user turns
        instead of losing them, and ``native_tools`` is only claimed when tool definitions reach the prompt."""

        def shows(marker: str, msgs: list[dict], tools: list | None = None) -> bool:
            try:
                return marker in self._formatter(messages=msgs, tools=tools).prompt
            except Exception:
                return False

        tool = {
            "type": "function",
            "function": {
                "name": "rig_probe_tool",
                "description": "probe",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        self.template = {
            "system": shows(
                "rig_probe_system",
                [{"role": "system", "content": "rig_probe_system"}, {"role": "user", "content": "u"}],
            ),
            "tool_role": shows(
                "rig_probe_result",
                [
                    {"role": "user", "content": "u"},
                    {"role": "assistant", "content": "a"},
                    {"role": "tool", "name": "t", "content": "rig_probe_result"},
                ],
            ),
            "tools": shows("rig_probe_tool", [{"role": "user", "content": "u"}], [tool]),
        }

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "template": dict(self.template),
            "constraint_backend": self.args.constraint_backend,
            "grammar_mask": self.args.grammar_mask,
            "constrained_requests": dict(self.served),
        }
        if self.threads:
            out["threads"] = dict(self.threads)
        if self._outlines is not None:
            out["outlines_vocab"] = self._outlines.audit.summary()
        return out

    def _fold(self, msgs: list[dict]) -> list[dict]:
        """Messages the template would drop, rewritten as user turns it renders."""
        if not self.template["tool_role"]:
            msgs = [
                {"role": "user", "content": f"Result of {m.get('name') or 'the tool'}: {m['content']}"}
                if m["role"] == "tool"
                else m
                for m in msgs
            ]
        if not self.template["system"] and any(m["role"] == "system" for m in msgs):
            system = "\n\n".join(m["content"] for m in msgs if m["role"] == "system")
            msgs = [m for m in msgs if m["role"] != "system"]
            first = next((i for i, m in enumerate(msgs) if m["role"] == "user"), None)
            if first is None:
                msgs.insert(0, {"role": "user", "content": system})
            else:
                msgs[first] = {**msgs[first], "content": system + "\n\n" + msgs[first]["content"]}
        # Consecutive user turns (a folded tool result after a re-prompt) are merged: strict templates alternate.
        merged: list[dict] = []
        for m in msgs:
            if merged and m["role"] == "user" and merged[-1]["role"] == "user":
                merged[-1] = {**merged[-1], "content": merged[-1]["content"] + "\n\n" + m["content"]}
            else:
                merged.append(m)
        return merged

    def _resolve_formatter(self, jinja_cls: Any) -> Any:
        """The GGUF's own chat template, or a llama-cpp-python named format (models.yaml chat_format)."""
        from llama_cpp import llama_chat_format

        if self.spec.chat_format:
            fn = getattr(llama_chat_format, "format_" + self.spec.chat_format.replace("-", "_"), None)
            if fn is None:
                raise EngineError(
                    f"models.yaml entry {self.spec.name!r}: chat_format {self.spec.chat_format!r} is "
                    "not a llama-cpp-python chat format (e.g. gemma, chatml, llama-3, mistral-instruct)"
                )
            return fn
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise EngineError(
                f"{self.weights} has no chat template in its metadata; set chat_format in models.yaml "
                f"(e.g. chatml, gemma, llama-3) for entry {self.spec.name!r}"
            )
        m, eos, bos = self.llm._model, self.llm.token_eos(), self.llm.token_bos()
        return jinja_cls(
            template=template,
            eos_token=m.token_get_text(eos) if eos != -1 else "",
            bos_token=m.token_get_text(bos) if bos != -1 else "",
        )

    def render(self, request: ChatRequest) -> tuple[str, bool, list[str]]:
        """Prompt text, whether it already holds BOS, and the template's stop strings."""
        msgs = self._fold(openai_messages(request.messages))
        resp = self._formatter(messages=msgs, tools=openai_tools(request.tools) or None, **self.template_kwargs)
        stop = resp.stop if isinstance(resp.stop, list) else [resp.stop] if resp.stop else []
        return resp.prompt, bool(resp.added_special), [x for x in stop if x]

    def count_tokens(self, text: str) -> int | None:
        return len(self.llm.tokenize(text.encode(), add_bos=False, special=False)) if self.llm else None

    def detokenize(self, ids: list[int]) -> bytes:
        """Bytes of generated tokens. ``Llama.detokenize`` reads each piece into a 32-byte buffer and silently
        drops longer pieces (379 tokens of the embedded Gemma, e.g. whole Devanagari words); this does not."""
        import llama_cpp

        vocab = self.llm._model.vocab
        size = 64
        buf = ctypes.create_string_buffer(size)
        out = bytearray()
        for t in ids:
            n = llama_cpp.llama_token_to_piece(vocab, t, buf, size, 0, False)
            if n < 0:  # too small: llama.cpp returns minus the size it needs
                size = -n
                buf = ctypes.create_string_buffer(size)
                n = llama_cpp.llama_token_to_piece(vocab, t, buf, size, 0, False)
            out += buf.raw[:n]
        return bytes(out)

    def _outlines_grammar(self, c: Constraint) -> str:
        """rig's grammar for the Outlines (llguidance) path: Lark, or GBNF when a think block is admitted."""
        if self.spec.thinking == "strip":
            return self.gbnf(c)  # llguidance reads GBNF too
        from rig.decoding import to_lark

        return to_lark(c)

    async def generate(self, request: ChatRequest) -> Reply:
        if self.llm is None:
            raise EngineError("engine not loaded")
        queued = time.perf_counter()
        return await self._native(self._generate_sync, request, queued)

    def _generate_sync(self, request: ChatRequest, queued: float) -> Reply:
        import llama_cpp

        with self._lock:
            t0 = time.perf_counter()
            gen = Generation(request_hash=request.digest(), timings=Timings(queue_s=t0 - queued))
            reply = Reply(gen)
            lazy = None
            try:
                prompt, has_bos, tmpl_stops = self.render(request)
                tokens = self.llm.tokenize(prompt.encode(), add_bos=not has_bos, special=True)
                if len(tokens) >= self.spec.context_length:
                    gen.error = f"prompt has {len(tokens)} tokens, context_length is {self.spec.context_length}"
                    gen.prompt_tokens = len(tokens)
                    return reply
                s = request.sampling
                procs = proc = None
                if request.constraint is not None and self._outlines is not None:
                    proc = self._outlines.processor(self._outlines_grammar(request.constraint))
                    procs = llama_cpp.LogitsProcessorList([proc])
                elif request.constraint is not None:
                    lazy = self._lazy_grammar(request.constraint, len(tokens), s)
                    procs = llama_cpp.LogitsProcessorList([lazy])
                max_new = min(s.max_tokens, self.spec.context_length - len(tokens))
                self.llm.set_seed(s.seed)
                stop_strs = [*s.stop, *tmpl_stops]
                out, first, last, finish, eog = self._decode(tokens, s, procs, max_new, [x.encode() for x in stop_strs])
                text = self.detokenize(out).decode("utf-8", errors="replace")
                if request.constraint is not None:
                    self.served["outlines" if proc is not None else "native"] += 1
                if proc is not None:
                    from rig.decoding.outlines_backend import OutlinesConstraints

                    # The processor consumes each token when asked for the next one, so the last generated token
                    # (unless generation ended on an end-of-generation token) is still to be checked.
                    err = OutlinesConstraints.error(proc, out[-1] if out and not eog else None)
                    if err:
                        gen.error = f"outlines constraint: {err}"
                for x in stop_strs:
                    if x in text:
                        text = text[: text.index(x)]
                end = time.perf_counter()
                gen.text = text
                gen.finish_reason = finish
                gen.prompt_tokens = len(tokens)
                gen.completion_tokens = len(out)
                gen.timings.ttft_s = (first - t0) if first else None
                gen.timings.e2e_s = end - t0
                reply.decode_s = (last - first) if first and last else None
            except Exception as e:  # a failed call is a recorded error, not a crashed run
                gen.error = f"{type(e).__name__}: {e}"
            finally:
                if lazy is not None:
                    lazy.close()
            return reply

    def _lazy_grammar(self, constraint: Constraint, prompt_tokens: int, s: Sampling) -> LazyGrammar:
        """rig's GBNF as a logits processor. A grammar llama.cpp cannot parse is an error here (llama-cpp-python's
        own LlamaGrammar accepts any text and crashes the process when sampling)."""
        return LazyGrammar(
            self.llm._model.vocab,
            self.gbnf(constraint),
            self.llm.n_vocab(),
            prompt_tokens,
            greedy=s.temperature == 0.0 and self.args.grammar_mask == "lazy",
        )

    def _decode(
        self, tokens: list[int], s: Sampling, procs: Any, max_new: int, stops: list[bytes]
    ) -> tuple[list[int], float | None, float | None, str, bool]:
        """Sample up to ``max_new`` tokens: the tokens, the first and last token's time, the finish reason and
        whether an end-of-generation token ended it (that token is not kept)."""
        import llama_cpp

        out: list[int] = []
        first = last = None
        finish = "length"
        eog = False
        vocab = self.llm._model.vocab
        # neutral where unset: llama-cpp-python's own min_p 0.05 and repeat_penalty 1.1 would change every reply
        neutral = {"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0}
        for tok in self.llm.generate(tokens, **(neutral | self.sampling_args(s)), logits_processor=procs):
            now = time.perf_counter()
            if llama_cpp.llama_vocab_is_eog(vocab, tok):
                finish = "stop"
                eog = True
                break
            first = first or now
            last = now
            out.append(tok)
            if stops and any(x in self.detokenize(out[-16:]) for x in stops):
                finish = "stop"
                break
            if len(out) >= max_new:
                break
        return out, first, last, finish, eog

    async def close(self) -> None:
        if self.llm is not None:
            await self._native(self.llm.close)  # after a call still running on the engine's thread
            self.llm = None
        if self._native_thread is not None:
            self._native_thread.shutdown(wait=False)  # its OpenMP team goes with it
            self._native_thread = None

    def versions(self) -> dict[str, str]:
        import llama_cpp

        return {"llama-cpp-python": llama_cpp.__version__}
