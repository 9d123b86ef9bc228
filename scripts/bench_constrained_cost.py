"""What each grammar backend pays to mask the vocabulary, for every grammar rig sends (issue 49).

The grammars and the texts walked are rig's own: `rig selftest` plays every benchmark's gold agent under every
constrained mode (JSON and YAML answers and tool calls, CallNavi's routing and parameter answers, UrbanGeoEval's choice
and regex forms), and each constraint is kept with the longest gold reply it accepted. For each backend and each of
two vocabularies (the embedded Gemma 3's 262,144 tokens and Qwen2.5-Coder's 151,665, both read from their GGUFs
without weights) it reports the compile time and the time to compute the next-token mask at each token of that reply,
p50 and p99, split into tokens inside a quoted string (where rig's schemas bound the length) and elsewhere; and
whether the backend enforces a string bound as rig writes it (a string of maxLength characters accepted, one more
refused).

Backends: llama.cpp's GBNF sampler (``llama_sampler_apply`` over the whole vocabulary: what a full mask costs; rig's
llama.cpp engine checks the sampled token first and pays this only when the grammar refuses it), llguidance on rig's
Lark (rig's outlines backend, and vLLM's ``guidance`` backend), xgrammar on rig's GBNF (vLLM's ``xgrammar`` backend, the
default), and outlines-core on the JSON schema (vLLM's ``outlines`` backend: JSON schemas and regexes only, compiled
in a child process with a time limit since its index is built ahead for the whole vocabulary).

    python scripts/bench_constrained_cost.py [--budget 20] [--out benchmarks/results/constrained_cost.md]

Run on an idle host: the figures are per-token CPU times. The walk of one grammar stops once a backend has spent
``--budget`` seconds on it (a counted repetition costs xgrammar a vocabulary scan per token), and the table says how
many tokens were timed.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's rig, not another installed one

REPO = Path(__file__).resolve().parents[1]
BOUND = 120  # the probe string's maxLength (RouteEval's bound)


# -- the grammars and texts: rig's gold replies under every constrained mode ----------------------------------------


def gold_constraints() -> list[tuple[str, Any, str]]:
    """(label, constraint, longest gold text it accepted), one per distinct grammar, from a `rig selftest` run."""
    from rig.decoding import to_gbnf
    from rig.execution.selftest import SelftestOptions, run_selftest

    seen: dict[str, tuple[str, Any, str]] = {}
    where: list[str] = []

    class Recorder:
        name = "recorder"

        def accepts(self, constraint: Any, text: str) -> bool:
            key = to_gbnf(constraint)
            if key not in seen or len(text) > len(seen[key][2]):
                seen[key] = (where[-1] if where else "?", constraint, text)
            return True

    import rig.execution.selftest as st

    original = st._mode

    async def labelled(cls: Any, mode: Any, opts: Any, acceptors: Any) -> Any:
        where.append(f"{cls.name} {mode.decode}/{mode.tool_mode or '-'}")
        return await original(cls, mode, opts, acceptors)

    st._mode = labelled  # type: ignore[assignment]
    try:
        run_selftest(SelftestOptions(), [Recorder()])
    finally:
        st._mode = original  # type: ignore[assignment]
    out = []
    for label, c, text in seen.values():
        what = c.kind.replace("_schema", "")
        if c.kind.endswith("schema"):
            schema = c.schema_ or {}
            title = schema.get("title") or _first_key(schema)
            keys = ",".join(list(schema.get("properties") or {})[:3])
            what += f" {title}" if title else (" list" if schema.get("type") == "array" else f" {{{keys}}}")
        elif c.kind == "choice":
            what += f" of {len(c.choices or [])}"
        else:
            what += f" {(c.pattern or '')[:24]!r}"
        out.append((f"{label}: {what}", c, text))
    # ``thinking: strip``: the same tool-call grammars behind one optional think block, as GBNF (what the engines
    # send; llguidance converts it), walked through a think block and then the gold reply
    from rig.decoding.constraint import Constraint
    from rig.engines.thinking import allow_thinking_gbnf

    think = "<think>The user wants a running loop from the library; check the distance first.</think>\n"
    for label, c, text in list(out):
        if label.startswith("routeeval none/"):
            g = Constraint(kind="grammar", grammar=allow_thinking_gbnf(to_gbnf(c)))
            out.append((f"{label} + thinking strip", g, think + text))
    return sorted(out, key=lambda x: x[0])


def _first_key(schema: Any) -> str:
    props = (schema or {}).get("properties") or {}
    name = (props.get("name") or {}).get("const") or (props.get("name") or {}).get("enum", [None])[0]
    return str(name) if name else ("answer" if props else "")


def probe_constraint() -> Any:
    from rig.decoding.constraint import Constraint

    return Constraint.model_validate({"kind": "json_schema", "schema_": {"type": "string", "maxLength": BOUND}})


def in_string(text: str) -> list[bool]:
    """Per character: inside a double-quoted string (rig's JSON and YAML grammars quote every string value)."""
    flags, inside, escaped = [], False, False
    for ch in text:
        if inside:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                inside = False
                flags.append(False)
                continue
            flags.append(True)
        else:
            flags.append(False)
            inside = ch == '"'
    return flags


# -- vocabularies ---------------------------------------------------------------------------------------------------


@dataclass
class Vocab:
    name: str
    llm: Any  # llama_cpp.Llama, vocab_only
    pieces: list[bytes] = field(default_factory=list)  # each token's bytes ("" for control tokens)
    eos: int = 0

    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=False))


def load_vocab(model: str) -> Vocab:
    import llama_cpp

    from rig.registry import load_registry, resolve_weights

    reg = load_registry(REPO / "models.yaml")
    llm = llama_cpp.Llama(model_path=resolve_weights(reg.get(model), reg.path), vocab_only=True, verbose=False)
    v = Vocab(model, llm, eos=llm.token_eos())
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    for t in range(llm.n_vocab()):
        control = llama_cpp.llama_vocab_is_control(vocab, t) or llama_cpp.llama_vocab_is_eog(vocab, t)
        v.pieces.append(b"" if control else llm.detokenize([t], special=False))
    return v


# -- backends: compile, then mask-and-advance along the text --------------------------------------------------------


@dataclass
class Walk:
    compile_s: float | None = None
    inside_ms: list[float] = field(default_factory=list)
    outside_ms: list[float] = field(default_factory=list)
    tokens: int = 0  # tokens of the text
    note: str = ""


def _walk(step: Any, ids: list[int], flags: list[bool], budget: float, w: Walk) -> Walk:
    """Time ``step(i, token)`` (mask, then advance) at each token until ``budget`` seconds are spent."""
    spent = 0.0
    for i, (t, inside) in enumerate(zip(ids, flags, strict=True)):
        t0 = time.perf_counter()
        ok = step(i, t)
        dt = time.perf_counter() - t0
        if ok is False:
            w.note = f"refused token {i} of the gold text"
            break
        (w.inside_ms if inside else w.outside_ms).append(dt * 1000)
        spent += dt
        if spent > budget:
            w.note = f"stopped after {i + 1} of {len(ids)} tokens ({budget:g} s budget)"
            break
    return w


def token_flags(v: Vocab, text: str, ids: list[int]) -> list[bool]:
    """Per token: does it start inside a quoted string."""
    chars = in_string(text)
    out, pos = [], 0
    data = text.encode()
    offsets = []
    for t in ids:
        offsets.append(pos)
        pos += len(v.llm.detokenize([t], special=False))
    char_at = [len(data[:o].decode(errors="ignore")) for o in offsets]
    for c in char_at:
        out.append(chars[c] if c < len(chars) else False)
    return out


class LlamaCppBackend:
    name = "llama.cpp GBNF sampler"
    grammar = "gbnf"

    def __init__(self, v: Vocab) -> None:
        import llama_cpp
        import numpy as np

        self.lc, self.v = llama_cpp, v
        self.vocab = llama_cpp.llama_model_get_vocab(v.llm.model)
        n = len(v.pieces)
        self.data = (llama_cpp.llama_token_data * n)()
        raw = ctypes.cast(self.data, ctypes.POINTER(ctypes.c_byte))
        view = np.ctypeslib.as_array(raw, shape=(ctypes.sizeof(self.data),))
        self.rows = view.view(np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)]))
        self.ids = np.arange(n, dtype=np.int32)

    def _sampler(self, gbnf: str) -> Any:
        return self.lc.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")

    def accepts(self, gbnf: str, text: str) -> bool:
        from rig.decoding.accept import LlamaAcceptor

        acc = LlamaAcceptor.__new__(LlamaAcceptor)
        acc.lc, acc.llm, acc.vocab, acc.eos, acc._samplers = self.lc, self.v.llm, self.vocab, self.v.eos, {}
        return bool(acc.accepts_gbnf(gbnf, text))

    def walk(self, c: Any, text: str, budget: float) -> Walk:
        from rig.decoding import to_gbnf

        w = Walk()
        gbnf = to_gbnf(c)
        t0 = time.perf_counter()
        smpl = self._sampler(gbnf)
        w.compile_s = time.perf_counter() - t0
        if not smpl:
            w.note = "llama.cpp could not parse the grammar"
            return w
        ids = self.v.tokenize(text)
        w.tokens = len(ids)
        lc = self.lc

        def step(_i: int, t: int) -> bool:
            self.rows["id"] = self.ids
            self.rows["logit"] = 0.0
            arr = lc.llama_token_data_array(data=self.data, size=len(self.ids), selected=-1, sorted=False)
            lc.llama_sampler_apply(smpl, ctypes.byref(arr))
            if self.rows["logit"][t] == float("-inf"):
                return False
            lc.llama_sampler_accept(smpl, t)
            return True

        _walk(step, ids, token_flags(self.v, text, ids), budget, w)
        lc.llama_sampler_free(smpl)
        return w


class GuidanceBackend:
    name = "llguidance (Lark)"
    grammar = "lark"

    def __init__(self, v: Vocab) -> None:
        import llguidance
        import llguidance.numpy as lnp

        self.llg, self.lnp, self.v = llguidance, lnp, v

        class Tok:
            eos_token_id = v.eos
            bos_token_id = None
            tokens = v.pieces
            special_token_ids: ClassVar[list[int]] = [i for i, p in enumerate(v.pieces) if not p]

            def __call__(self, s: Any) -> list[int]:
                return v.tokenize(s if isinstance(s, str) else s.decode())

        self.tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(Tok()))
        self.mask = lnp.allocate_token_bitmask(1, self.tok.vocab_size)

    def matcher(self, c: Any) -> Any:
        from rig.decoding import to_lark

        m = self.llg.LLMatcher(self.tok, self.llg.grammar_from("lark", to_lark(c)), log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def accepts_text(self, c: Any, text: str) -> bool:
        m = self.matcher(c)
        return bool(m.consume_tokens(self.v.tokenize(text)) and not m.is_error() and m.is_accepting())

    def walk(self, c: Any, text: str, budget: float) -> Walk:
        w = Walk()
        t0 = time.perf_counter()
        m = self.matcher(c)
        w.compile_s = time.perf_counter() - t0
        ids = self.v.tokenize(text)
        w.tokens = len(ids)

        def step(_i: int, t: int) -> bool:
            self.lnp.fill_next_token_bitmask(m, self.mask, 0)
            return bool(m.consume_token(t))

        return _walk(step, ids, token_flags(self.v, text, ids), budget, w)


class XGrammarBackend:
    name = "xgrammar (GBNF)"
    grammar = "gbnf"

    def __init__(self, v: Vocab) -> None:
        import xgrammar

        self.xg, self.v = xgrammar, v
        info = xgrammar.TokenizerInfo(v.pieces, stop_token_ids=[v.eos])
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.mask = xgrammar.allocate_token_bitmask(1, len(v.pieces))

    def accepts_text(self, c: Any, text: str) -> bool:
        from rig.decoding import to_gbnf

        m = self.xg.GrammarMatcher(self.compiler.compile_grammar(to_gbnf(c)))
        return bool(all(m.accept_token(t) for t in self.v.tokenize(text)) and m.accept_token(self.v.eos))

    def walk(self, c: Any, text: str, budget: float) -> Walk:
        from rig.decoding import to_gbnf

        w = Walk()
        t0 = time.perf_counter()
        m = self.xg.GrammarMatcher(self.compiler.compile_grammar(to_gbnf(c)))
        w.compile_s = time.perf_counter() - t0
        ids = self.v.tokenize(text)
        w.tokens = len(ids)

        def step(_i: int, t: int) -> bool:
            m.fill_next_token_bitmask(self.mask)
            return bool(m.accept_token(t))

        return _walk(step, ids, token_flags(self.v, text, ids), budget, w)


def _outlines_child(model: str, schema: str, text: str, budget: float, q: Any) -> None:
    try:
        import outlines_core as oc
        from outlines_core.json_schema import build_regex_from_schema

        v = load_vocab(model)
        by_piece: dict[bytes, list[int]] = {}
        for i, p in enumerate(v.pieces):
            if p and i != v.eos:
                by_piece.setdefault(p, []).append(i)
        vocabulary = oc.Vocabulary(v.eos, {k.decode("latin-1"): ids for k, ids in by_piece.items()})
        w = Walk()
        t0 = time.perf_counter()
        index = oc.Index(build_regex_from_schema(schema), vocabulary)
        w.compile_s = time.perf_counter() - t0
        guide = oc.Guide(index)
        ids = v.tokenize(text)
        w.tokens = len(ids)

        def step(_i: int, t: int) -> bool:
            allowed = guide.get_tokens()
            if t not in allowed:
                return False
            guide.advance(t)
            return True

        _walk(step, ids, token_flags(v, text, ids), budget, w)
        q.put(w)
    except Exception as e:  # reported as the row's note
        q.put(Walk(note=f"{type(e).__name__}: {str(e)[:120]}"))


def outlines_walk(model: str, c: Any, text: str, budget: float, limit: float) -> Walk:
    if c.kind != "json_schema":
        return Walk(note="not supported (vLLM's outlines backend takes JSON schemas and regexes, no grammar)")
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_outlines_child, args=(model, json.dumps(c.schema_), text, budget, q))
    p.start()
    p.join(limit)
    if p.is_alive():
        p.kill()
        p.join()
        return Walk(note=f"compile > {limit:g} s (stopped)")
    return q.get() if not q.empty() else Walk(note=f"child exited {p.exitcode}")


# -- the table ------------------------------------------------------------------------------------------------------


def pct(xs: list[float], p: float) -> str:
    if not xs:
        return "–"
    s = sorted(xs)
    return f"{s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]:.3f}"


def row(vocab: str, label: str, backend: str, w: Walk) -> str:
    comp = "–" if w.compile_s is None else f"{w.compile_s:.3f}"
    timed = len(w.inside_ms) + len(w.outside_ms)
    return (
        f"| {vocab} | {label} | {backend} | {comp} | {pct(w.inside_ms, 50)} | {pct(w.inside_ms, 99)} | "
        f"{pct(w.outside_ms, 50)} | {pct(w.outside_ms, 99)} | {timed}/{w.tokens} | {w.note} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of masking per backend and grammar")
    ap.add_argument("--outlines-limit", type=float, default=60.0, help="seconds an outlines-core compile may take")
    ap.add_argument("--models", default="gemma3-270m,qwen2.5-coder-0.5b")
    ap.add_argument("--only", default="", help="comma-separated backends: llamacpp,guidance,xgrammar,outlines")
    ap.add_argument("--match", default="", help="only the grammars whose label contains this")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "constrained_cost.md")
    args = ap.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    load0 = os.getloadavg()
    print("collecting rig's grammars from the gold replies (rig selftest) ...", file=sys.stderr)
    grammars = [g for g in gold_constraints() if args.match in g[0]]
    probe = probe_constraint()
    lines = []
    bounds = []
    for model in args.models.split(","):
        v = load_vocab(model)
        vname = f"{model} ({len(v.pieces):,})"
        backends: list[tuple[str, Any]] = []
        for key, cls in (("llamacpp", LlamaCppBackend), ("guidance", GuidanceBackend), ("xgrammar", XGrammarBackend)):
            if not only or key in only:
                backends.append((key, cls(v)))
        for key, b in backends:
            at = '"' + "a" * BOUND + '"'
            past = '"' + "a" * (BOUND + 1) + '"'
            if key == "llamacpp":
                from rig.decoding import to_gbnf

                ok, refused = b.accepts(to_gbnf(probe), at), not b.accepts(to_gbnf(probe), past)
            else:
                ok, refused = b.accepts_text(probe, at), not b.accepts_text(probe, past)
            bounds.append(f"| {vname} | {b.name} | {'yes' if ok else 'NO'} | {'yes' if refused else 'NO'} |")
        for label, c, text in grammars:
            for _key, b in backends:
                print(f"{model}: {label}: {b.name}", file=sys.stderr)
                try:
                    w = b.walk(c, text, args.budget)
                except Exception as e:  # a backend that cannot take the grammar: a row saying so
                    w = Walk(note=f"{type(e).__name__}: {str(e)[:120]}")
                lines.append(row(vname, label, b.name, w))
            if not only or "outlines" in only:
                print(f"{model}: {label}: outlines-core", file=sys.stderr)
                w = outlines_walk(model, c, text, args.budget, args.outlines_limit)
                lines.append(row(vname, label, "outlines-core (JSON schema)", w))
        v.llm.close()
    load1 = os.getloadavg()
    versions = ", ".join(
        f"{p} {version(p)}" for p in ("llama-cpp-python", "llguidance", "xgrammar", "outlines-core") if _has(p)
    )
    head = [
        "# What each grammar backend pays per token, for every grammar rig sends",
        "",
        f"Written by `scripts/bench_constrained_cost.py` ({time.strftime('%Y-%m-%d')}): {versions}; one thread, "
        f"{platform.machine()} CPU, {os.cpu_count()} cores; load average {load0[0]:.2f} before, {load1[0]:.2f} after. "
        "Each grammar is walked along the longest gold reply it accepted in `rig selftest`; mask time per token in "
        "milliseconds, p50 and p99, inside a quoted string (where rig bounds the length) and elsewhere.",
        "",
        "## Does the backend enforce a string bound as rig writes it?",
        "",
        f"A JSON string of maxLength {BOUND}, through rig's GBNF (llama.cpp, xgrammar) or Lark (llguidance):",
        "",
        f"| vocabulary | backend | {BOUND} characters accepted | {BOUND + 1} refused |",
        "|---|---|---|---|",
        *bounds,
        "",
        "## Compile and mask times",
        "",
        "| vocabulary | grammar | backend | compile (s) | in string p50 (ms) | p99 | elsewhere p50 (ms) | p99 | tokens "
        "timed | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    text = "\n".join(head + lines) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


def _has(dist: str) -> bool:
    try:
        version(dist)
        return True
    except Exception:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
