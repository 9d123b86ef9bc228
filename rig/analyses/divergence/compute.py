"""The divergence pass itself: each variant teacher-forced on the reference's (prompt, reply) pairs, the rows
compared token by token and aggregated per token class and per episode."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from rig.analyses.divergence.records import (
    PREFETCH_WINDOW,
    Bound,
    ClassRow,
    DivergenceError,
    DivergenceReport,
    DivergenceSettings,
    EpisodeRow,
    Kind,
    WorstToken,
)
from rig.analyses.divergence.replay import Pair, replay_pairs
from rig.analyses.divergence.tokenclass import CLASSES, token_classes
from rig.progress import progress


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
        args = VllmArgs.model_validate(spec.engine_args or {}).vllm_kwargs()
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
    from rig.analyses.compare import run_summary

    h = run_summary(run_dir).headline
    return h.by_episode() if h else {}


# A variant as loaded: where it came from, its models.yaml entry, its scorer.
Loaded = tuple[Any, Any, Any]
# One (prompt, reply) pair to score: its place among the pairs, the pair, prompt tokens, prompt + reply tokens.
Todo = tuple[int, Pair, list[int], list[int]]


def compute(s: DivergenceSettings, loaded: dict[str, Any] | None = None) -> DivergenceReport:
    """The whole pass, in memory: replay, teacher-force every variant, aggregate. Raises DivergenceError.
    ``loaded``: vLLM scorers the caller already holds, by ``"vllm:" + weights`` (used, not closed)."""
    from rig.engines.llamacpp_logits import LogitsError

    run, man = _reference(s)
    ref_label = s.reference_label or man.config.model.name
    n_ctx = man.config.model.context_length
    held = dict(loaded or {})
    loaded = dict(held)
    ref_spec, ref = _load_variant(man.config.model.name, s.models_file, n_ctx, s, f"reference run {run}: model", loaded)
    scorers: list[Loaded] = []
    distinct: dict[int, Any] = {}  # the scorers, once each (a vLLM one may feed the reference and a variant)
    try:
        digest = ref.tokenizer_digest()
        _load_variants(s, run, ref, digest, ref_label, n_ctx, loaded, scorers)
        inner = ref.replay_engine(ref_spec)
        t0 = time.perf_counter()
        pairs, skipped, mismatches = _replay(run, inner)
        t1 = time.perf_counter()
        scored = _score_pairs(_sequences(pairs, ref, inner, n_ctx, skipped), ref, scorers, distinct)
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
    classes_out, episodes_out, worst = _aggregates(s, run, ref, ref_spec, ref_label, scorers, scored)
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


def _reference(s: DivergenceSettings) -> tuple[Path, Any]:
    """The reference run folder and its manifest; a missing, newer or damaged one is named, as is a pass with no
    variant."""
    from rig.runfolder.folder import RunFolder
    from rig.runformat import NewerFormatError, RunFileError

    run = Path(s.reference_run)
    try:
        man = RunFolder(run).manifest
    except (NewerFormatError, RunFileError) as e:  # none, newer or damaged: the file is named
        raise DivergenceError(f"reference run {run}: {e}") from None
    if not s.variants:
        raise DivergenceError("no variant to compare with the reference")
    return run, man


def _load_variants(
    s: DivergenceSettings,
    run: Path,
    ref: Any,
    digest: str,
    ref_label: str,
    n_ctx: int,
    loaded: dict[str, Any],
    out: list[Loaded],
) -> None:
    """Each variant's scorer appended to ``out`` as it loads (so the caller closes every one that did, also when a
    later one fails); a tokenizer other than the reference's (``digest``) is refused."""
    for v in s.variants:
        spec, sc = _load_variant(v.model, s.models_file, n_ctx, s, "variant", loaded)
        out.append((v, spec, sc))
        if sc.tokenizer_digest() != digest:
            raise DivergenceError(
                f"variant {v.name!r}: tokenizer differs from the reference {ref_label!r} "
                f"(run {run}; {sc.engine} vocabulary vs {ref.engine}): divergence needs the same vocabulary on "
                "both sides"
            )


def _replay(run: Path, inner: Any) -> tuple[list[Pair], dict[str, str], list[str]]:
    """The reference's (prompt, reply) pairs, what was skipped and why, and the request-hash mismatches; a run
    without one pair to teacher-force is refused."""
    from rig.runformat import NewerFormatError, RunFileError

    try:
        pairs, skipped, mismatches, _ = replay_pairs(run, inner)
    except (RunFileError, NewerFormatError) as e:
        raise DivergenceError(f"reference run {run}: {e}") from None
    if not pairs:
        why = "; ".join(f"{k}: {v}" for k, v in list(skipped.items())[:3]) or "no stored replies"
        raise DivergenceError(
            f"reference run {run}: results.sqlite status: no scored episode with a reply to teacher-force ({why})"
        )
    return pairs, skipped, mismatches


def _sequences(pairs: list[Pair], ref: Any, inner: Any, n_ctx: int, skipped: dict[str, str]) -> list[Todo]:
    """The pairs as token sequences to score; an empty reply is left out, one past the context is added to
    ``skipped``."""
    todo: list[Todo] = []
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
    return todo


def _score_pairs(
    todo: list[Todo], ref: Any, scorers: list[Loaded], distinct: dict[int, Any]
) -> dict[str, list[_Scored]]:
    """Every variant's scored reply tokens, by variant, in the pairs' order. Scored in prefix order (each prompt
    prefills only what it does not share with the one before), stored in the pairs' order, so aggregates and bootstrap
    draws do not depend on the order of scoring. ``distinct`` gets each scorer once, for the caller to reset."""
    from rig.engines.llamacpp_logits import prefix_order

    by_pair: dict[int, dict[str, list[_Scored]]] = {}
    ordered = [todo[i] for i in prefix_order([t[3] for t in todo])]
    # each scorer is told a window's sequences ahead (vLLM scores them in one batch), once per stream it feeds:
    # a vLLM scorer shared by the reference and a variant is asked for every sequence twice
    streams = [ref, *(sc for _, _, sc in scorers)]
    distinct.update((id(sc), sc) for sc in streams)
    # a pass over 100 long CallNavi replies runs half an hour on a CPU
    with progress("divergence: replies", len(ordered)) as bar:
        for w, (n, p, ptoks, seq) in enumerate(ordered):
            if w % PREFETCH_WINDOW == 0:
                window = [(t[3], len(t[2])) for t in ordered[w : w + PREFETCH_WINDOW]]
                for sc in distinct.values():
                    sc.prefetch(window * sum(x is sc for x in streams))
            by_pair[n] = _score_pair(p, ptoks, seq, ref, scorers)
            bar.advance()
    scored: dict[str, list[_Scored]] = {v.name: [] for v, _, _ in scorers}
    for n in sorted(by_pair):
        for name, rows_ in by_pair[n].items():
            scored[name] += rows_
    return scored


def _score_pair(p: Pair, ptoks: list[int], seq: list[int], ref: Any, scorers: list[Loaded]) -> dict[str, list[_Scored]]:
    """One pair's reply tokens compared, reference against each variant, one reply position at a time (chunk sizes
    differ by engine)."""
    from rig.engines.logits import compare_variants

    out: dict[str, list[_Scored]] = {v.name: [] for v, _, _ in scorers}
    rtoks = seq[len(ptoks) :]
    pieces = [ref.piece(t) for t in rtoks]
    classes = token_classes(p.reply.text, pieces, p.tools)
    text_bytes = b"".join(pieces)
    offsets = np.cumsum([0, *[len(x) for x in pieces]])
    rows = [_positions(ref.rows(seq, len(ptoks)))]
    rows += [_positions(sc.rows(seq, len(ptoks))) for _, _, sc in scorers]
    for i, at in enumerate(zip(*rows, strict=True)):
        target = seq[len(ptoks) + i]
        context = _context(text_bytes, int(offsets[i]), int(offsets[i + 1]))
        compared = compare_variants(at[0], at[1:], target)
        for (v, _, _), (kld, agree, lr, lv) in zip(scorers, compared, strict=True):
            out[v.name].append(
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
    return out


def _context(text: bytes, a: int, b: int) -> str:
    """The reply around the token at bytes a..b, the token in [[ ]]."""
    return (
        text[max(0, a - 60) : a].decode("utf-8", "replace")
        + "[["
        + text[a:b].decode("utf-8", "replace")
        + "]]"
        + text[b : b + 20].decode("utf-8", "replace")
    )


def _aggregates(
    s: DivergenceSettings,
    run: Path,
    ref: Any,
    ref_spec: Any,
    ref_label: str,
    scorers: list[Loaded],
    scored: dict[str, list[_Scored]],
) -> tuple[list[ClassRow], list[EpisodeRow], list[WorstToken]]:
    """Per variant: the token-class rows, the episode rows (with score deltas from the variants' runs) and the
    worst tokens."""
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
    return classes_out, episodes_out, worst


def _first_error(e: Exception) -> str:
    if isinstance(e, ValidationError) and e.errors():
        err = e.errors()[0]
        return f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
    return str(e).splitlines()[0] if str(e) else type(e).__name__


# -- storage and rendering ---------------------------------------------------------------------------------------
