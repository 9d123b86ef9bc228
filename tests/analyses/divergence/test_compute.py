"""Token-level divergence on the embedded model: a run against itself, a requantized variant, the full-logits
cross-check, and bad input through `rig compare --run ... --divergence` (exit 2, nothing written)."""

from __future__ import annotations

import csv
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rig.analyses.divergence.compute import compute
from rig.analyses.divergence.output import write_report
from rig.analyses.divergence.records import CSV_COLUMNS, DivergenceSettings, VariantSource
from tests.conftest import REPO

# The pass on the embedded model is marked `model` test by test; the window logic below needs no model.


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory, embedded_weights: str) -> Path:
    """One CallNavi question (routing task) on the embedded model under its JSON grammar (so the reply has syntax and
    API names to classify), cut at 16 tokens."""
    out = tmp_path_factory.mktemp("ref")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "rig.cli",
            "bench",
            "--model",
            "gemma3-270m",
            "--benchmark",
            "callnavi",
            "--limit",
            "1",
            "--max-tokens",
            "16",
            "--decode",
            "json",
            "-O",
            "task=routing",
            "--out",
            str(out),
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr
    return next(out.iterdir())


def rig(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rig.cli", *args], capture_output=True, text=True, timeout=900)


@pytest.mark.model
def test_self_is_exactly_zero(reference_run: Path, tmp_path: Path) -> None:
    s = DivergenceSettings(
        reference_run=str(reference_run),
        variants=[VariantSource(model="gemma3-270m", label="again")],
        out=str(tmp_path),
    )
    report = compute(s)
    assert report.pairs == 1 and not report.request_mismatches  # replayed to the stored request hash
    measured = [r for r in report.classes if r.tokens > 0]
    assert {r.token_class for r in measured} >= {"all", "structure", "tool_name"}
    for r in measured:
        assert r.kind == "self" and r.bound == "exact" and r.top_k is None  # two full distributions
        assert r.mean_kld == 0.0 and r.kld_ci_high == 0.0 and r.p99_kld == 0.0
        assert r.top1_agreement == 1.0
        assert r.mean_logprob_reference == r.mean_logprob_variant
    write_report(report, tmp_path)
    with (tmp_path / "divergence.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert {row["token_class"] for row in rows if row["tokens"] != "0"} == {r.token_class for r in measured}
    # a class without tokens is "not measured" (empty), never 0
    assert all(row["mean_kld"] == "" for row in rows if row["tokens"] == "0")


@pytest.mark.model
def test_requantized_variant_diverges(
    reference_run: Path, quantized_models: Path, embedded_weights: str, tmp_path: Path
) -> None:
    s = DivergenceSettings(
        reference_run=str(reference_run),
        variants=[VariantSource(model="gemma3-270m-q4_0")],
        out=str(tmp_path),
        models_file=str(quantized_models),
    )
    report = compute(s)
    total = next(r for r in report.classes if r.token_class == "all")
    assert total.kind == "quantization" and total.bound == "exact" and total.tokens > 0
    assert total.mean_kld is not None and total.mean_kld > 0
    assert total.kld_ci_low is not None and total.kld_ci_high is not None
    assert total.kld_ci_low <= total.mean_kld <= total.kld_ci_high
    assert report.worst and report.worst[0].kld == max(w.kld for w in report.worst)


@pytest.mark.model
def test_streamed_rows_match_full_logits_and_numpy(quantized_models: Path, embedded_weights: str) -> None:
    """The reply-positions-only path against llama-cpp-python's logits_all over the same batches, with the KLD,
    top-1 and log-probs recomputed by plain vectorised numpy."""
    from llama_cpp import Llama

    from rig.engines.llamacpp_logits import LogitScorer
    from rig.engines.logits import compare

    prompt = "<start_of_turn>user\nCall the weather API for Helsinki.<end_of_turn>\n<start_of_turn>model\n"
    reply = '{"API": ["getWeather"], "parameters": [{"city": "Helsinki", "lat": 60.17}]}'
    q4_0 = str(quantized_models.parent / "w" / "g-q4_0.gguf")
    a, b = LogitScorer(embedded_weights, 512, chunk=64), LogitScorer(q4_0, 512, chunk=64)
    ptoks = a.tokenize(prompt, add_bos=True, special=True)
    seq = ptoks + a.tokenize(reply, add_bos=False, special=False)
    first = len(ptoks)
    streamed = []
    for (i, ra), (_, rb) in zip(a.rows(seq, first), b.rows(seq, first), strict=True):
        streamed += compare(ra, rb, seq[i : i + len(ra)])
    a.close()
    b.close()
    full = []
    for w in (embedded_weights, q4_0):
        llm = Llama(model_path=w, n_ctx=512, n_batch=512, n_ubatch=512, logits_all=True, verbose=False)
        llm.eval(seq[: first - 1])  # the same two batches as the streamed path: prompt, then the reply positions
        llm.eval(seq[first - 1 : -1])
        full.append(np.array(llm.scores[first - 1 : len(seq) - 1], dtype=np.float64))
        llm.close()
    lp = [x - x.max(1, keepdims=True) for x in full]
    lp = [x - np.log(np.exp(x).sum(1, keepdims=True)) for x in lp]
    kld = (np.exp(lp[0]) * (lp[0] - lp[1])).sum(1)
    targets = np.array(seq[first:])
    assert len(streamed) == len(kld) == len(seq) - first
    assert np.allclose([x[0] for x in streamed], kld, rtol=1e-9, atol=1e-12)
    assert [x[1] for x in streamed] == list(full[0].argmax(1) == full[1].argmax(1))
    assert np.allclose([x[2] for x in streamed], lp[0][np.arange(len(targets)), targets], rtol=1e-9)
    assert np.allclose([x[3] for x in streamed], lp[1][np.arange(len(targets)), targets], rtol=1e-9)
    assert kld.mean() > 0


@pytest.mark.model
def test_bad_input_exits_2_and_writes_nothing(reference_run: Path, tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    shutil.copy(REPO / "models.yaml", models)
    models.write_text(
        models.read_text()
        + "\n  ghost:\n    engine: llamacpp\n    weights: {file: missing/ghost.gguf}\n    chat_format: gemma\n"
        + "    quantization: q4_k_m\n    context_length: 8192\n"
    )
    out = tmp_path / "cmp"
    # the reference run's copy standing for a variant named in models.yaml whose weights file is missing
    ghost = tmp_path / "ghost-run"
    shutil.copytree(reference_run, ghost)
    man = (ghost / "manifest.json").read_text().replace('"name": "gemma3-270m"', '"name": "ghost"', 1)
    (ghost / "manifest.json").write_text(man)
    p = rig(
        "compare",
        "--run",
        str(reference_run),
        "--run",
        str(ghost),
        "--divergence",
        "--models",
        str(models),
        "--out",
        str(out),
    )
    assert p.returncode == 2, p.stderr
    assert "'ghost'" in p.stderr and "weights.file" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists() or not any(out.iterdir())

    # a reference run whose episodes all failed
    failed = tmp_path / "failed-run"
    shutil.copytree(reference_run, failed)
    with sqlite3.connect(failed / "results.sqlite") as c:
        c.execute(  # the column and the stored record alike
            "UPDATE results SET status = 'failed', error_category = 'engine_error', "
            "record = json_set(record, '$.status', 'failed', '$.error_category', 'engine_error')"
        )
    p = rig("compare", "--run", str(failed), "--run", str(reference_run), "--divergence", "--out", str(out))
    assert p.returncode == 2, p.stderr
    assert str(failed) in p.stderr and "status" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists() or not any(out.iterdir())

    # a run folder from an older rig whose benchmark data has moved away
    old = REPO / "tests" / "fixtures" / "run_before_issue17"
    p = rig("compare", "--run", str(old), "--run", str(reference_run), "--divergence", "--out", str(out))
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.model
def test_different_tokenizer_is_refused(reference_run: Path, embedded_weights: str, tmp_path: Path) -> None:
    # The embedded GGUF with one vocabulary entry renamed in place (same length, so the file stays valid).
    data = bytearray(Path(embedded_weights).read_bytes())
    at = data.find(b"<unused0>", 0, 8_000_000)
    assert at > 0
    data[at : at + 9] = b"<unusedZ>"
    (tmp_path / "other.gguf").write_bytes(bytes(data))
    models = tmp_path / "models.yaml"
    shutil.copy(REPO / "models.yaml", models)
    models.write_text(
        models.read_text()
        + "\n  othertok:\n    engine: llamacpp\n    weights: {file: other.gguf}\n    chat_format: gemma\n"
        + "    quantization: q4_k_m\n    context_length: 8192\n"
    )
    other = tmp_path / "other-run"
    shutil.copytree(reference_run, other)
    man = (other / "manifest.json").read_text().replace('"name": "gemma3-270m"', '"name": "othertok"', 1)
    (other / "manifest.json").write_text(man)
    out = tmp_path / "cmp"
    p = rig(
        "compare",
        "--run",
        str(reference_run),
        "--run",
        str(other),
        "--divergence",
        "--models",
        str(models),
        "--out",
        str(out),
    )
    assert p.returncode == 2, p.stderr
    assert "'othertok'" in p.stderr and "tokenizer" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.model
def test_compare_runs_with_divergence(reference_run: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    shutil.copytree(reference_run, again)
    out = tmp_path / "cmp"
    p = rig("compare", "--run", str(reference_run), "--run", str(again), "--divergence", "--out", str(out))
    assert p.returncode == 0, p.stderr
    cdir = next(out.iterdir())
    md = (cdir / "compare.md").read_text()
    assert "## Token-level divergence against gemma3-270m" in md and "| gemma3-270m | self | all |" in md
    with (cdir / "divergence.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["token_class"] == "all"]
    assert len(rows) == 1 and rows[0]["mean_kld"] == "0.0" and rows[0]["top1_agreement"] == "1.0"
    assert (cdir / "divergence_episodes.csv").read_text().startswith("variant,episode_id,repeat,token_class")


class _Scorer:
    """Records how many sequences each prefetch hands it."""

    def __init__(self) -> None:
        self.prefetched: list[int] = []

    def prefetch(self, items: list[tuple[list[int], int]]) -> None:
        self.prefetched.append(len(items))


def test_every_window_is_prefetched_once_per_stream_a_scorer_feeds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scorer shared by the reference and a variant (one vLLM engine) is handed each window's sequences twice, the
    last window too, and the pairs come back in their own order whatever order they were scored in."""
    import rig.analyses.divergence.compute as dv
    from rig.analyses.divergence.records import PREFETCH_WINDOW

    n = PREFETCH_WINDOW + 6
    shared, other = _Scorer(), _Scorer()
    variants = [(VariantSource(model="m", label=name), None, sc) for name, sc in (("same", shared), ("b", other))]
    monkeypatch.setattr(dv, "_score_pair", lambda p, ptoks, seq, ref, scorers: {"same": [p], "b": []})
    # prompts sorted backwards, so prefix order scores them in reverse
    todo = [(i, i, [n - i], [n - i, 1]) for i in range(n)]
    distinct: dict[int, object] = {}
    scored = dv._score_pairs(todo, shared, variants, distinct)  # type: ignore[arg-type]
    assert shared.prefetched == [2 * PREFETCH_WINDOW, 2 * 6] and other.prefetched == [PREFETCH_WINDOW, 6]
    assert scored == {"same": list(range(n)), "b": []} and len(distinct) == 2


def test_the_pass_shows_its_progress_over_the_replies(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pass runs for minutes to an hour: it counts the replies it has scored on stderr."""
    import rig.analyses.divergence.compute as dv

    sc = _Scorer()
    monkeypatch.setattr(dv, "_score_pair", lambda p, ptoks, seq, ref, scorers: {})
    todo = [(i, i, [i], [i, 1]) for i in range(7)]
    dv._score_pairs(todo, sc, [], {})  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "divergence: replies" in err and "7/7" in err
