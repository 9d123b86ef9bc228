"""Token-level divergence of model variants on a reference run's own trajectories (`rig compare --divergence`).

The reference run's episodes are replayed through the benchmark (its own prompts and agent loop, each engine call
answered with the stored reply), so every (prompt, reply) pair the reference produced is recovered exactly; the
replayed request's hash is checked against the stored one. Each variant is then teacher-forced on those pairs
(prefill only, no generation) and every reply token gets: KL(reference || variant) over the full vocabulary, whether
the top-1 tokens agree, and the log-probability each model gives to the reference's token. llama.cpp gives full
distributions; vLLM gives only the top-k of ``prompt_logprobs``, so a pair with a vLLM side gets the coarse-grained
KL divergence of ``rig.engines.logits`` (known tokens plus one bucket for the rest), a lower bound labelled as such
(``bound``). A pair of one model is "self", of two engines "engine divergence", else "quantization". Tokens are
grouped by the part of the reply they belong to (``rig.runs.tokenclass``) and per episode, so divergence can be
lined up with the episodes whose scores flipped.

Everything is computed before anything is written; the results land in the output folder as ``divergence.csv``
(one row per variant and token class, plus ``all``), ``divergence_episodes.csv`` and ``divergence.json`` (the typed
``DivergenceReport``). The pass runs in a process of its own (``python -m rig.runs.divergence SETTINGS.json``),
handed a JSON file of ``DivergenceSettings``, like every variant of a comparison.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from rig.records import (
    DEFAULT_DIVERGENCE_TOP_K,
    ChatRequest,
    DivergenceTopK,
    EpisodeResult,
    Generation,
    read_record,
    write_record,
)
from rig.runs.tokenclass import CLASSES, output_names, token_classes

DIVERGENCE_FORMAT = 1
PREFETCH_WINDOW = 64  # sequences a scorer is handed ahead (a vLLM batch); bounds the rows held between them
CSV_COLUMNS = (
    "variant",
    "reference",
    "kind",
    "token_class",
    "tokens",
    "mean_kld",
    "kld_ci_low",
    "kld_ci_high",
    "top1_agreement",
    "p99_kld",
    "mean_logprob_reference",
    "mean_logprob_variant",
    "bound",
    "top_k",
)
EPISODE_COLUMNS = (
    "variant",
    "episode_id",
    "repeat",
    "token_class",
    "tokens",
    "mean_kld",
    "top1_agreement",
    "score_reference",
    "score_variant",
    "score_delta",
)


class DivergenceError(ValueError):
    """Bad input for a divergence pass; str() names the run or variant and the field (exit code 2)."""


class VariantSource(BaseModel):
    """A variant to teacher-force: a models.yaml entry, and optionally its own run of the same benchmark (for the
    per-episode score deltas)."""

    model: str
    run: str | None = None
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or self.model


class DivergenceSettings(BaseModel):
    """What a divergence pass reads and how; written as JSON for the child process that runs it."""

    reference_run: str
    reference_label: str | None = None
    variants: list[VariantSource]
    out: str
    models_file: str | None = None
    chunk: int = Field(default=64, ge=1, le=512)  # reply positions decoded (and rows of logits held) at a time
    n_boot: int = Field(default=1000, ge=100)
    seed: int = 0
    worst: int = Field(default=10, ge=0)  # worst tokens kept per variant
    threads: int | None = None
    top_k: DivergenceTopK = DEFAULT_DIVERGENCE_TOP_K  # prompt log-probabilities asked of a vLLM model per position


Kind = Literal["quantization", "engine divergence", "self"]
# "exact": both sides full distributions; "lower": a top-k side, so KLD values are the coarse-grained lower bound
# (top-1 agreement and log-probs stay exact).
Bound = Literal["exact", "lower"]


class ClassRow(BaseModel):
    variant: str
    reference: str
    kind: Kind
    token_class: str
    tokens: int
    mean_kld: float | None = None
    kld_ci_low: float | None = None
    kld_ci_high: float | None = None
    top1_agreement: float | None = None
    p99_kld: float | None = None
    mean_logprob_reference: float | None = None
    mean_logprob_variant: float | None = None
    bound: Bound = "exact"
    top_k: int | None = None  # k of the top-k side when the bound is "lower"


class EpisodeRow(BaseModel):
    variant: str
    episode_id: str
    repeat: int
    token_class: str
    tokens: int
    mean_kld: float
    top1_agreement: float
    score_reference: float | None = None
    score_variant: float | None = None
    score_delta: float | None = None


class WorstToken(BaseModel):
    variant: str
    episode_id: str
    repeat: int
    token_class: str
    token: str
    context: str  # reply text before the token, the token in [[ ]], a little after
    kld: float
    logprob_reference: float
    logprob_variant: float


class DivergenceReport(BaseModel):
    format_version: int = DIVERGENCE_FORMAT
    settings: DivergenceSettings
    reference: str
    engine: str  # the reference's
    engines: dict[str, str] = Field(default_factory=dict)  # variant label -> engine
    full_vocabulary: bool = True  # False: some pair had a top-k side (its rows say bound "lower")
    tokenizer: str
    episodes: int
    pairs: int
    skipped: dict[str, str] = Field(default_factory=dict)  # "episode_id#repeat" -> why it was left out
    request_mismatches: list[str] = Field(default_factory=list)
    classes: list[ClassRow]
    episode_rows: list[EpisodeRow]
    worst: list[WorstToken]
    seconds: dict[str, float] = Field(default_factory=dict)  # replay, scoring (wall)


# -- replay ------------------------------------------------------------------------------------------------------


class Pair(BaseModel):
    """One engine call of the reference run: the request as replayed and the stored reply."""

    episode_id: str
    repeat: int
    idx: int
    request: ChatRequest
    reply: Generation
    tools: list[str]


def _replay_engine(inner: Any) -> Any:
    """An engine answering each call with the next stored reply, recording the requests; rendering, capabilities
    and tool-call parsing are the reference engine's, so the benchmark builds exactly the requests it built."""
    from rig.engines.base import Engine, Reply

    class Replay(Engine):
        name = "replay"

        def __init__(self) -> None:
            self.spec, self.weights, self.gpu, self.args = inner.spec, inner.weights, None, inner.args
            self.counters = {"tool_calls_from_text": 0}
            self.meter = None  # a replay draws no energy worth measuring (Engine.__init__ would re-validate args)
            self.queue: list[Generation] = []
            self.requests: list[ChatRequest] = []

        @property
        def capabilities(self) -> Any:
            return inner.capabilities

        async def load(self) -> None:
            return None

        async def generate(self, request: ChatRequest) -> Reply:
            self.requests.append(request)
            stored = self.queue.pop(0) if self.queue else None
            gen = Generation(request_hash=request.digest())
            if stored is None:
                gen.error = "replay: the reference run stored no reply for this call"
            else:
                gen.text, gen.finish_reason, gen.error = stored.text, stored.finish_reason, stored.error
                gen.prompt_tokens, gen.completion_tokens = stored.prompt_tokens, stored.completion_tokens
            return Reply(gen)

        def parse_native_calls(self, text: str, request: ChatRequest) -> Any:
            return inner.parse_native_calls(text, request)

        def count_tokens(self, text: str) -> int | None:
            return inner.count_tokens(text)

    return Replay()


def replay_pairs(run_dir: Path, inner: Any) -> tuple[list[Pair], dict[str, str], list[str], list[EpisodeResult]]:
    """Every (request, reply) of the reference run's scored episodes; skipped episodes with the reason; keys of
    calls whose replayed request differs from the stored hash; the results themselves."""
    from rig.benchmarks import get_benchmark_class
    from rig.benchmarks.base import RunContext
    from rig.runs.folder import RunFolder

    folder = RunFolder(run_dir)
    man, info = folder.manifest, folder.benchmarks[0]
    results = folder.results(info.name)
    try:
        bench = get_benchmark_class(info.name)(Path(info.data_path), info.options)
        if bench.data_hash() != info.data_hash:
            raise DivergenceError(
                f"reference run {run_dir}: manifest.json config.benchmarks[0].data_hash: the {info.name} data at "
                f"{info.data_path} changed since the run, so its prompts cannot be rebuilt"
            )
        episodes = {e.id: e for e in bench.episodes()}
    except DivergenceError:
        raise
    except Exception as e:
        raise DivergenceError(
            f"reference run {run_dir}: manifest.json config.benchmarks[0].data_path: cannot rebuild the "
            f"{info.name} episodes ({type(e).__name__}: {e})"
        ) from None
    cfg = man.config
    # validated: the manifest records the modes as plain strings
    ctx = RunContext.model_validate({"sampling": cfg.model.sampling, "decode": cfg.decode, "tool_mode": cfg.tool_mode})
    engine = _replay_engine(inner)
    pairs: list[Pair] = []
    skipped: dict[str, str] = {}
    mismatches: list[str] = []

    async def go() -> None:
        await bench.setup()
        try:
            for res in results:
                key = f"{res.episode_id}#{res.repeat}"
                if res.status != "scored":
                    skipped[key] = f"status {res.status} ({res.error_category or 'no category'})"
                    continue
                ep = episodes.get(res.episode_id)
                if ep is None:
                    skipped[key] = "episode no longer in the benchmark data"
                    continue
                engine.queue, engine.requests = list(res.generations), []
                await bench.run_episode(ep, engine, ctx, res.repeat)
                names = {t.name for t in ep.tools} | {c.name for c in res.tool_calls} | output_names(res.output)
                for i, (req, gen) in enumerate(zip(engine.requests, res.generations, strict=False)):
                    if req.digest() != gen.request_hash:
                        mismatches.append(f"{key}/{i}")
                    if gen.error or not gen.text:
                        continue
                    tools = names | {t.name for t in req.tools} | {c.name for c in gen.tool_calls}
                    pairs.append(
                        Pair(
                            episode_id=res.episode_id,
                            repeat=res.repeat,
                            idx=i,
                            request=req,
                            reply=gen,
                            tools=sorted(tools),
                        )
                    )
        finally:
            await bench.teardown()

    asyncio.run(go())
    return pairs, skipped, mismatches, results


# -- scoring -----------------------------------------------------------------------------------------------------


class _Scored(BaseModel):
    episode_id: str
    repeat: int
    cls: str
    kld: float
    agree: bool
    lp_ref: float
    lp_var: float
    token: str
    context: str


def _load_variant(
    name: str, models_file: str | None, n_ctx: int, s: DivergenceSettings, who: str, loaded: dict[str, Any]
) -> Any:
    """(spec, Scorer) of a models.yaml entry: llama.cpp (GGUF, full vocabulary) or vLLM (Hugging Face folder, top-k).
    One vLLM engine per weights is shared (``loaded``): a second in one process would double its memory and start-up,
    and its rows are fresh per call, so a model compared with itself is still computed twice."""
    from rig.engines.llamacpp_logits import LogitsError
    from rig.engines.logits import LlamaCppScorer
    from rig.registry import RegistryError, default_registry_path, load_registry, resolve_weights

    path = models_file or str(default_registry_path())
    try:
        spec = load_registry(path).get(name)
        if spec.engine not in ("llamacpp", "vllm"):
            raise DivergenceError(
                f"{who} {name!r}: models.yaml engine {spec.engine!r}: divergence needs logits, which rig reads from "
                "llamacpp (full vocabulary) and vllm (top-k prompt log-probabilities) only"
            )
        weights = resolve_weights(spec, path)
    except RegistryError as e:
        raise DivergenceError(f"{who} {name!r}: {e}") from None
    try:
        if spec.engine == "llamacpp":
            return spec, LlamaCppScorer(weights, n_ctx, n_threads=s.threads, chunk=s.chunk)
        key = f"vllm:{weights}"
        if key not in loaded:
            loaded[key] = _vllm_scorer(spec, weights, n_ctx, s, who)
        return spec, loaded[key]
    except LogitsError as e:
        raise DivergenceError(f"{who} {name!r}: models.yaml weights: {e}") from None


def _vllm_scorer(spec: Any, weights: str, n_ctx: int, s: DivergenceSettings, who: str) -> Any:
    from rig.engines.vllm import VllmArgs

    try:
        args = VllmArgs.model_validate(spec.engine_args or {}).model_dump(exclude_unset=True)
    except ValidationError as e:
        raise DivergenceError(f"{who} {spec.name!r}: models.yaml engine_args.{_first_error(e)}") from None
    from rig.engines.vllm_logits import VllmScorer

    try:
        return VllmScorer(weights, n_ctx, top_k=s.top_k, engine_args=args, seed=spec.sampling.seed or 0)
    except ImportError as e:  # vllm itself is imported on load
        raise DivergenceError(f"{who} {spec.name!r}: models.yaml engine 'vllm': vLLM is not installed ({e})") from None


def _kind(spec: Any, ref_spec: Any, sc: Any, ref: Any) -> Kind:
    if spec.name == ref_spec.name:
        return "self"
    return "engine divergence" if sc.engine != ref.engine else "quantization"


def _positions(chunks: Any) -> Any:
    """A scorer's chunks as one row per reply position (a llama.cpp row is only read before its next chunk)."""
    for _, rows in chunks:
        yield from rows


def _aggregate(
    label: str, ref: str, kind: Kind, rows: list[_Scored], n_boot: int, seed: int, top_k: int | None
) -> list[ClassRow]:
    out = []
    bound: Bound = "exact" if top_k is None else "lower"
    for cls in ("all", *CLASSES):
        sel = [r for r in rows if cls == "all" or r.cls == cls]
        if not sel:
            out.append(
                ClassRow(variant=label, reference=ref, kind=kind, token_class=cls, tokens=0, bound=bound, top_k=top_k)
            )
            continue
        kld = np.array([r.kld for r in sel])
        # Tokens of one episode are not independent: the CI resamples episodes (cluster bootstrap of the mean).
        groups: dict[tuple[str, int], list[float]] = defaultdict(list)
        for r in sel:
            groups[(r.episode_id, r.repeat)].append(r.kld)
        sums = np.array([sum(v) for v in groups.values()])
        counts = np.array([len(v) for v in groups.values()], dtype=float)
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(sums), size=(n_boot, len(sums)))
        boot = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
        out.append(
            ClassRow(
                variant=label,
                reference=ref,
                kind=kind,
                token_class=cls,
                tokens=len(sel),
                mean_kld=float(kld.mean()),
                kld_ci_low=float(np.percentile(boot, 2.5)),
                kld_ci_high=float(np.percentile(boot, 97.5)),
                top1_agreement=float(np.mean([r.agree for r in sel])),
                p99_kld=float(np.percentile(kld, 99)),
                mean_logprob_reference=float(np.mean([r.lp_ref for r in sel])),
                mean_logprob_variant=float(np.mean([r.lp_var for r in sel])),
                bound=bound,
                top_k=top_k,
            )
        )
    return out


def _episode_rows(
    label: str, rows: list[_Scored], ref_scores: dict[tuple[str, int], float], var_scores: dict[tuple[str, int], float]
) -> list[EpisodeRow]:
    by: dict[tuple[str, int, str], list[_Scored]] = defaultdict(list)
    for r in rows:
        by[(r.episode_id, r.repeat, "all")].append(r)
        by[(r.episode_id, r.repeat, r.cls)].append(r)
    out = []
    for (eid, rep, cls), sel in sorted(by.items()):
        a, b = ref_scores.get((eid, rep)), var_scores.get((eid, rep))
        out.append(
            EpisodeRow(
                variant=label,
                episode_id=eid,
                repeat=rep,
                token_class=cls,
                tokens=len(sel),
                mean_kld=float(np.mean([r.kld for r in sel])),
                top1_agreement=float(np.mean([r.agree for r in sel])),
                score_reference=a,
                score_variant=b,
                score_delta=None if a is None or b is None else b - a,
            )
        )
    return out


def _scores(run_dir: Path) -> dict[tuple[str, int], float]:
    from rig.runs.compare import run_summary

    h = run_summary(run_dir).headline
    return h.by_episode() if h else {}


def compute(s: DivergenceSettings, loaded: dict[str, Any] | None = None) -> DivergenceReport:
    """The whole pass, in memory: replay, teacher-force every variant, aggregate. Raises DivergenceError.
    ``loaded``: vLLM scorers the caller already holds, by ``"vllm:" + weights`` (used, not closed)."""
    from rig.engines.llamacpp_logits import LogitsError, prefix_order
    from rig.engines.logits import compare_variants
    from rig.runformat import NewerFormatError, RunFileError
    from rig.runs.folder import RunFolder

    run = Path(s.reference_run)
    try:
        man = RunFolder(run).manifest
    except (NewerFormatError, RunFileError) as e:  # none, newer or damaged: the file is named
        raise DivergenceError(f"reference run {run}: {e}") from None
    if not s.variants:
        raise DivergenceError("no variant to compare with the reference")
    ref_name = man.config.model.name
    ref_label = s.reference_label or ref_name
    n_ctx = man.config.model.context_length
    held = dict(loaded or {})
    loaded = dict(held)
    ref_spec, ref = _load_variant(ref_name, s.models_file, n_ctx, s, f"reference run {run}: model", loaded)
    scorers = []
    distinct: dict[int, Any] = {}  # the scorers, once each (a vLLM one may feed the reference and a variant)
    try:
        digest = ref.tokenizer_digest()
        for v in s.variants:
            spec, sc = _load_variant(v.model, s.models_file, n_ctx, s, "variant", loaded)
            scorers.append((v, spec, sc))
            if sc.tokenizer_digest() != digest:
                raise DivergenceError(
                    f"variant {v.name!r}: tokenizer differs from the reference {ref_label!r} "
                    f"(run {run}; {sc.engine} vocabulary vs {ref.engine}): divergence needs the same vocabulary on "
                    "both sides"
                )
        inner = ref.replay_engine(ref_spec)
        t0 = time.perf_counter()
        try:
            pairs, skipped, mismatches, _ = replay_pairs(run, inner)
        except (RunFileError, NewerFormatError) as e:
            raise DivergenceError(f"reference run {run}: {e}") from None
        if not pairs:
            why = "; ".join(f"{k}: {v}" for k, v in list(skipped.items())[:3]) or "no stored replies"
            raise DivergenceError(
                f"reference run {run}: results.sqlite status: no scored episode with a reply to teacher-force ({why})"
            )
        t1 = time.perf_counter()
        scored: dict[str, list[_Scored]] = {v.name: [] for v, _, _ in scorers}
        todo: list[tuple[int, Pair, list[int], list[int]]] = []
        for n, p in enumerate(pairs):
            ptoks = ref.prompt_tokens(inner, p.request)
            rtoks = ref.reply_tokens(p.reply.text)
            if not rtoks:
                continue
            seq = ptoks + rtoks
            if len(seq) > n_ctx:
                skipped[f"{p.episode_id}#{p.repeat}/{p.idx}"] = f"{len(seq)} tokens exceed the context {n_ctx}"
                continue
            todo.append((n, p, ptoks, seq))
        # Scored in prefix order (each prompt prefills only what it does not share with the one before), stored
        # in the pairs' order, so aggregates and bootstrap draws do not depend on the order of scoring.
        by_pair: dict[int, dict[str, list[_Scored]]] = {}
        ordered = [todo[i] for i in prefix_order([t[3] for t in todo])]
        # each scorer is told a window's sequences ahead (vLLM scores them in one batch), once per stream it feeds:
        # a vLLM scorer shared by the reference and a variant is asked for every sequence twice
        streams = [ref, *(sc for _, _, sc in scorers)]
        distinct.update((id(sc), sc) for sc in streams)
        for w, (n, p, ptoks, seq) in enumerate(ordered):
            if w % PREFETCH_WINDOW == 0:
                window = [(t[3], len(t[2])) for t in ordered[w : w + PREFETCH_WINDOW]]
                for sc in distinct.values():
                    sc.prefetch(window * sum(x is sc for x in streams))
            rtoks = seq[len(ptoks) :]
            by_pair[n] = {v.name: [] for v, _, _ in scorers}
            pieces = [ref.piece(t) for t in rtoks]
            classes = token_classes(p.reply.text, pieces, p.tools)
            text_bytes = b"".join(pieces)
            offsets = np.cumsum([0, *[len(x) for x in pieces]])
            # every scorer's rows for this pair, one reply position at a time (chunk sizes differ by engine)
            streams = [_positions(ref.rows(seq, len(ptoks)))]
            streams += [_positions(sc.rows(seq, len(ptoks))) for _, _, sc in scorers]
            for i, at in enumerate(zip(*streams, strict=True)):
                target = seq[len(ptoks) + i]
                a, b = int(offsets[i]), int(offsets[i + 1])
                context = (
                    text_bytes[max(0, a - 60) : a].decode("utf-8", "replace")
                    + "[["
                    + text_bytes[a:b].decode("utf-8", "replace")
                    + "]]"
                    + text_bytes[b : b + 20].decode("utf-8", "replace")
                )
                compared = compare_variants(at[0], at[1:], target)
                for (v, _, _), (kld, agree, lr, lv) in zip(scorers, compared, strict=True):
                    by_pair[n][v.name].append(
                        _Scored(
                            episode_id=p.episode_id,
                            repeat=p.repeat,
                            cls=classes[i],
                            kld=kld,
                            agree=agree,
                            lp_ref=lr,
                            lp_var=lv,
                            token=pieces[i].decode("utf-8", "replace"),
                            context=context,
                        )
                    )
        for n in sorted(by_pair):
            for name, rows_ in by_pair[n].items():
                scored[name] += rows_
        t2 = time.perf_counter()
    except LogitsError as e:
        raise DivergenceError(f"reference run {run}: {e}") from None
    finally:
        for sc in distinct.values():
            sc.prefetch([])  # rows of an interrupted window: a held scorer outlives the pass
        closed = {id(x) for x in held.values()}
        for sc in [ref] + [sc for _, _, sc in scorers]:
            if id(sc) not in closed:  # a shared vLLM scorer once
                closed.add(id(sc))
                sc.close()
    ref_scores = _scores(run)
    classes_out: list[ClassRow] = []
    episodes_out: list[EpisodeRow] = []
    worst: list[WorstToken] = []
    for v, spec, sc in scorers:
        rows = scored[v.name]
        # a top-k side on either end makes every KLD of the pair a lower bound
        top_k = next((x.top_k for x in (ref, sc) if not x.full_vocabulary), None)
        kind = _kind(spec, ref_spec, sc, ref)
        classes_out += _aggregate(v.name, ref_label, kind, rows, s.n_boot, s.seed, top_k)
        var_scores = _scores(Path(v.run)) if v.run else {}
        episodes_out += _episode_rows(v.name, rows, ref_scores, var_scores)
        for r in sorted(rows, key=lambda r: -r.kld)[: s.worst]:
            worst.append(
                WorstToken(
                    variant=v.name,
                    episode_id=r.episode_id,
                    repeat=r.repeat,
                    token_class=r.cls,
                    token=r.token,
                    context=r.context,
                    kld=r.kld,
                    logprob_reference=r.lp_ref,
                    logprob_variant=r.lp_var,
                )
            )
    return DivergenceReport(
        settings=s,
        reference=ref_label,
        engine=ref.engine,
        engines={v.name: sc.engine for v, _, sc in scorers},
        full_vocabulary=ref.full_vocabulary and all(sc.full_vocabulary for _, _, sc in scorers),
        tokenizer=digest,
        episodes=len({(p.episode_id, p.repeat) for p in pairs}),
        pairs=len(pairs),
        skipped=skipped,
        request_mismatches=mismatches,
        classes=classes_out,
        episode_rows=episodes_out,
        worst=worst,
        seconds={"replay": t1 - t0, "scoring": t2 - t1},
    )


def _first_error(e: Exception) -> str:
    if isinstance(e, ValidationError) and e.errors():
        err = e.errors()[0]
        return f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
    return str(e).splitlines()[0] if str(e) else type(e).__name__


# -- storage and rendering ---------------------------------------------------------------------------------------


def _csv(rows: list[BaseModel], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        d = r.model_dump()
        w.writerow(["" if d[c] is None else d[c] for c in columns])  # empty = not measured, never 0
    return buf.getvalue()


def write_report(report: DivergenceReport, out: Path) -> list[Path]:
    """divergence.csv, divergence_episodes.csv and divergence.json, each written whole (temporary file, rename)."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "divergence.csv": _csv(list(report.classes), CSV_COLUMNS),
        "divergence_episodes.csv": _csv(list(report.episode_rows), EPISODE_COLUMNS),
    }
    tmps = []
    for name, text in files.items():
        tmp = out / (name + ".tmp")
        tmp.write_text(text)
        tmps.append((tmp, out / name))
    write_record(out / "divergence.json", report)
    for tmp, dst in tmps:
        os.replace(tmp, dst)
    return [dst for _, dst in tmps] + [out / "divergence.json"]


def read_report(out: Path) -> DivergenceReport:
    """A comparison folder's divergence.json; ValueError naming the file (and the field), NewerFormatError from a
    newer rig."""
    import json

    from rig.records import read_record
    from rig.runformat import check_version

    path = out / "divergence.json"
    try:
        head = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: not readable JSON ({getattr(e, 'strerror', None) or e})") from None
    check_version(path, head.get("format_version", 1) if isinstance(head, dict) else 1, DIVERGENCE_FORMAT)
    return read_record(path, DivergenceReport)


def _f(x: float | None, digits: int = 4) -> str:
    return "not measured" if x is None else f"{x:.{digits}f}"


def divergence_md(report: DivergenceReport) -> str:
    """The compare.md section: KLD per token class and variant, flipped episodes lined up, the worst tokens."""
    lines = [
        f"## Token-level divergence against {report.reference}",
        "",
        f"Each variant teacher-forced on the {report.pairs} replies of {report.episodes} reference episodes "
        f"(reference on {report.engine}; KL divergence reference -> variant in nats; 95% CI by resampling "
        "episodes; top-1 = the variants' most likely tokens agree).",
    ]
    if any(r.bound == "lower" for r in report.classes):
        lines += [
            "",
            "Rows with bound `lower (top-k)` are **approximate**: one side (vLLM `prompt_logprobs`) gives only its k "
            "most likely tokens, so the KL divergence is taken over the tokens known on both sides plus one bucket "
            "holding all others. Merging tokens never increases a KL divergence, so these values are lower bounds on "
            "the full-vocabulary KLD (means, CIs and p99 alike); top-1 agreement and the log-probs are exact. "
            "`engine divergence` rows compare two engines, not two quantizations.",
        ]
    lines += [
        "",
        "| Variant | Kind | Token class | Tokens | Mean KLD | CI low | CI high | Top-1 agreement | p99 KLD | Bound |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report.classes:
        if r.tokens == 0 and r.token_class != "all":
            continue
        bound = "exact" if r.bound == "exact" else f"lower (top-{r.top_k})"
        lines.append(
            f"| {r.variant} | {r.kind} | {r.token_class} | {r.tokens} | {_f(r.mean_kld)} | {_f(r.kld_ci_low)} | "
            f"{_f(r.kld_ci_high)} | {_f(r.top1_agreement, 3)} | {_f(r.p99_kld)} | {bound} |"
        )
    flips = [e for e in report.episode_rows if e.score_delta not in (None, 0.0) and e.token_class != "all"]
    if flips:
        lines += ["", "Episodes whose score changed, by token class of the divergence:", ""]
        lines += ["| Variant | Episode | Score delta | Token class | Tokens | Mean KLD | Top-1 agreement |"]
        lines += ["|---|---|---|---|---|---|---|"]
        for e in sorted(flips, key=lambda e: (e.variant, e.episode_id, e.repeat, -e.mean_kld)):
            lines.append(
                f"| {e.variant} | {e.episode_id}#{e.repeat} | {e.score_delta:+.3f} | {e.token_class} | {e.tokens} | "
                f"{e.mean_kld:.4f} | {e.top1_agreement:.3f} |"
            )
    if report.worst:
        lines += ["", "Worst tokens:", "", "| Variant | Episode | Class | KLD | log p ref | log p variant | Context |"]
        lines += ["|---|---|---|---|---|---|---|"]
        for w in report.worst:
            ctx = w.context.replace("|", "\\|").replace("\n", "\\n")
            lines.append(
                f"| {w.variant} | {w.episode_id}#{w.repeat} | {w.token_class} | {w.kld:.3f} | "
                f"{w.logprob_reference:.3f} | {w.logprob_variant:.3f} | `{ctx}` |"
            )
    notes = []
    if report.skipped:
        notes.append(f"{len(report.skipped)} episode(s) or calls left out (see divergence.json `skipped`)")
    if report.request_mismatches:
        notes.append(
            f"{len(report.request_mismatches)} replayed request(s) differ from the stored request hash "
            "(the benchmark's prompts changed since the run)"
        )
    if notes:
        lines += ["", "_" + "; ".join(notes) + "._"]
    return "\n".join(lines) + "\n"


def check_top_k(top_k: int) -> int:
    """``--top-k`` under DivergenceSettings' bound; a DivergenceError naming the flag (checked before variants run)."""
    from pydantic import TypeAdapter

    try:
        return TypeAdapter(DivergenceTopK).validate_python(top_k)
    except ValidationError as e:
        raise DivergenceError(f"--top-k {top_k!r}: {e.errors()[0]['msg']}") from None


def run_divergence(
    cdir: Path, runs: list[Path], reference: str | None, models_file: Path | None, top_k: int = DEFAULT_DIVERGENCE_TOP_K
) -> str:
    """The divergence section of a comparison: the pass runs in its own process (models loaded and freed there),
    handed ``divergence-settings.json``; returns the markdown. ``top_k``: log-probabilities asked of a vLLM side per
    position. Raises DivergenceError on bad input."""
    import subprocess

    from rig.runs.compare import variant_labels
    from rig.runs.folder import RunFolder

    check_top_k(top_k)
    labels = variant_labels(runs)
    models = [RunFolder(r).manifest.config.model.name for r in runs]
    i = 0
    if reference is not None:
        hits = [k for k, (lab, m) in enumerate(zip(labels, models, strict=True)) if reference in (lab, m)]
        if not hits:
            raise DivergenceError(f"--reference {reference!r}: not among the variants ({', '.join(labels)})")
        i = hits[0]
    settings = DivergenceSettings(
        reference_run=str(runs[i]),
        reference_label=labels[i],
        variants=[VariantSource(model=models[k], run=str(r), label=labels[k]) for k, r in enumerate(runs) if k != i],
        out=str(cdir),
        models_file=str(models_file) if models_file else None,
        top_k=top_k,
    )
    path = cdir / "divergence-settings.json"
    write_record(path, settings)
    p = subprocess.run([sys.executable, "-m", "rig.runs.divergence", str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        lines = [x for x in p.stderr.splitlines() if x.strip()]
        raise DivergenceError(lines[-1] if p.returncode == 2 and lines else f"the pass failed (exit {p.returncode})")
    return divergence_md(read_report(cdir))


def run(settings: DivergenceSettings) -> DivergenceReport:
    report = compute(settings)
    write_report(report, Path(settings.out))
    return report


def main(argv: list[str] | None = None) -> int:
    """``python -m rig.runs.divergence SETTINGS.json``: the pass in a process of its own; exit 2 on bad input."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rig.runs.divergence SETTINGS.json", file=sys.stderr)
        return 2
    try:
        settings = read_record(Path(args[0]), DivergenceSettings)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    try:
        run(settings)
    except DivergenceError as e:
        print(str(e), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
