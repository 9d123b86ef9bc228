"""RunSummary: the one computation of latency, tokens, cut replies, memory and headline score behind every report."""

from pathlib import Path

import pytest

from rig.records import EpisodeResult, Generation, Timings
from rig.render.report import report_markdown
from rig.runfolder.manifest import RunManifest, host_info
from rig.runfolder.summary import RunSummary, summarize, total
from rig.telemetry.gpu import GpuMemorySummary
from tests.render.test_report import _build_fake, make_run

GiB = 2**30


def manifest(**kw) -> RunManifest:  # type: ignore[no-untyped-def]
    cfg = _build_fake(None)[-1]
    return RunManifest(run_id="r", config_hash=cfg.digest(), config=cfg, host=host_info(), started_at=0.0, **kw)


def result(eid: str, *gens: Generation, score: float | None = 1.0, status: str = "scored") -> EpisodeResult:
    return EpisodeResult(
        benchmark="callnavi", episode_id=eid, repeat=0, generations=list(gens), scores={"ast": score}, status=status
    )  # type: ignore[arg-type]


def gen(
    e2e: float | None = None,
    ttft: float | None = None,
    tps: float | None = None,
    pt: int | None = None,
    ct: int | None = None,
    finish: str | None = None,
) -> Generation:
    return Generation(
        request_hash="h",
        prompt_tokens=pt,
        completion_tokens=ct,
        finish_reason=finish,
        timings=Timings(e2e_s=e2e, ttft_s=ttft, decode_tps=tps),
    )


def headline(r: EpisodeResult) -> float | None:
    return r.scores.get("ast")


def test_nothing_measured_stays_none() -> None:
    s = summarize(manifest(), [result("a", gen()), result("b", gen())])
    assert s.generations == 2
    assert s.e2e_p50_s is s.e2e_p95_s is s.ttft_p50_s is s.ttft_p95_s is None
    assert s.decode_tps_median is s.prompt_tokens_mean is s.prompt_tokens_total is None
    assert s.completion_tokens_mean is s.completion_tokens_total is None
    assert s.cut_replies is None and s.cut_share is None and s.finish_reasons == 0
    assert s.load_time_s is s.peak_rss_bytes is s.gpu_load_bytes is s.gpu_peak_bytes is None
    assert s.gpu_unavailable == "no GPU record" and s.headline is None


def test_percentiles_medians_and_token_counts_skip_unmeasured_generations() -> None:
    gens = [gen(e2e=float(i), ttft=i / 10, tps=10.0 * i, pt=100 * i, ct=i) for i in (1, 2, 3, 4, 5)]
    s = summarize(manifest(), [result("a", *gens[:2]), result("b", *gens[2:], gen())])
    assert s.episodes == 2 and s.generations == 6
    assert (s.e2e_p50_s, s.e2e_p95_s) == (3.0, pytest.approx(4.8))  # linear interpolation, the None left out
    assert (s.ttft_p50_s, s.ttft_p95_s) == (pytest.approx(0.3), pytest.approx(0.48))
    assert s.decode_tps_median == 30.0
    assert (s.prompt_tokens_mean, s.prompt_tokens_total) == (300.0, 1500)
    assert (s.completion_tokens_mean, s.completion_tokens_total) == (3.0, 15)


def test_cut_replies_count_length_among_generations_that_say_why_they_stopped() -> None:
    s = summarize(
        manifest(),
        [
            result("a", gen(finish="stop"), gen(finish="length")),
            result("b", gen(), gen(finish="length"), gen(finish="tool_calls")),
        ],
    )
    assert (s.cut_replies, s.finish_reasons) == (2, 4)
    assert s.cut_share == 0.5
    none_cut = summarize(manifest(), [result("a", gen(finish="stop"), gen())])
    assert (none_cut.cut_replies, none_cut.cut_share) == (0, 0.0)  # measured, and none cut: 0, not None


def test_failed_episodes_and_the_planned_count() -> None:
    s = summarize(manifest(), [result("a", gen()), result("b", status="failed", score=None)])
    assert (s.episodes, s.failed, s.generations) == (2, 1, 1)
    assert s.expected_episodes == 32  # the fake run's CallNavi episodes x 1 repeat


def test_memory_from_the_manifest() -> None:
    gpu = GpuMemorySummary(available=True, baseline_bytes=GiB, after_load_bytes=3 * GiB, peak_bytes=5 * GiB)
    s = summarize(manifest(load_time_s=1.5, peak_rss_bytes=2 * GiB, gpu_memory=gpu), [])
    assert (s.load_time_s, s.peak_rss_bytes, s.gpu_load_bytes, s.gpu_peak_bytes) == (1.5, 2 * GiB, 2 * GiB, 5 * GiB)
    assert s.gpu_unavailable is None
    off = summarize(manifest(gpu_memory=GpuMemorySummary(available=False, reason="no --gpu given (CPU run)")), [])
    assert off.gpu_unavailable == "no --gpu given (CPU run)" and off.gpu_peak_bytes is None


def test_a_zero_byte_peak_is_a_missing_reading() -> None:
    gpu = GpuMemorySummary(available=True, baseline_bytes=0, after_load_bytes=0, peak_bytes=0)
    s = summarize(manifest(peak_rss_bytes=0, gpu_memory=gpu), [])
    assert s.peak_rss_bytes is None and s.gpu_peak_bytes is None
    assert s.gpu_load_bytes == 0  # a difference over the baseline can truly be 0


def test_headline_score_needs_two_samples_for_an_interval() -> None:
    one = summarize(manifest(), [result("a", score=1.0), result("b", score=None)], headline=headline).headline
    assert one is not None and one.samples == 1 and one.mean is one.low is one.high is None
    h = summarize(manifest(), [result(f"e{i}", score=float(i % 2)) for i in range(10)], headline=headline).headline
    assert h is not None and h.samples == 10 and h.mean == 0.5
    assert h.low is not None and h.high is not None and h.low < 0.5 < h.high
    assert h.by_episode() == {(f"e{i}", 0): float(i % 2) for i in range(10)}


def test_total_is_none_only_when_nothing_was_measured() -> None:
    assert total([None, None]) is None and total([]) is None
    assert total([0, None]) == 0 and total([1.5, None, 2]) == 3.5


def test_summary_round_trips_as_json(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, n_eps=4)
    man = RunManifest.read(run_dir)
    s = summarize(man, [result("a", gen(e2e=0.5, finish="length"))], man.config.benchmarks[0], headline)
    assert RunSummary.model_validate_json(s.model_dump_json()) == s


def test_report_prints_a_zero_byte_peak_as_not_measured(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, n_eps=4)
    man = RunManifest.read(run_dir)
    man.peak_rss_bytes = 0
    man.write(run_dir)
    assert "| Peak process RSS | not measured |" in report_markdown(run_dir)


def test_a_judged_headline_names_its_judge_wherever_it_is_shown() -> None:
    """UrbanGeoEval's headline mixes in the reasoning total, which rests on the judge's R (issue 19): the CI table,
    the one-screen row and the HTML dashboard say who judged ("self-judged" when the candidate did)."""
    from rig.benchmarks.urbangeo.benchmark import UrbanGeoEval
    from rig.render.report import ci_table
    from rig.render.screen import summary_row
    from rig.runfolder.config import BenchmarkInfo

    def reasoning(i: int, pct: float) -> EpisodeResult:
        tags = {"module": "reasoning", "task": "DS", "judge": "gemma3-270m", "judge_self": "yes"}
        return EpisodeResult(benchmark="urbangeo", episode_id=f"r{i}", repeat=0, tags=tags, scores={"total_pct": pct})

    info = BenchmarkInfo(name="urbangeo", version="1", data_path="x", data_hash="h", options={}, episodes=2)
    s = summarize(manifest(), [reasoning(0, 40.0), reasoning(1, 60.0)], info, UrbanGeoEval.headline)
    assert s.headline is not None and s.headline.source == "judge: gemma3-270m, self-judged"
    t = ci_table(s, "m")
    assert t is not None and t.title.endswith("(judge: gemma3-270m, self-judged)")
    assert summary_row(s)[3] == "MCQ / reasoning score (judge: gemma3-270m, self-judged)"
    from rig.analyses.compare import judged_note

    assert judged_note([("m", s)]) == "Headline scores given by a judge: m: judge: gemma3-270m, self-judged. "
    knowledge = EpisodeResult(
        benchmark="urbangeo", episode_id="k", repeat=0, tags={"module": "knowledge"}, scores={"correct": 1.0}
    )
    assert summarize(manifest(), [knowledge, knowledge], info, UrbanGeoEval.headline).headline.source is None  # type: ignore[union-attr]
    # a program-scored benchmark names no source
    assert summarize(manifest(), [result("a"), result("b")], None, headline).headline.source is None  # type: ignore[union-attr]


def test_call_forms_counted_and_the_episodes_only_rig_reads_named() -> None:
    """Issue 35: per form the generations and episodes; an episode with a call in a form the reference harness does
    not read (EVGeoQA's reads bare JSON only) is counted, with its share of the headline."""
    from rig.benchmarks.evgeoqa.benchmark import EVGeoQA
    from rig.render.report import call_form_table
    from rig.runfolder.config import BenchmarkInfo

    def g(form: str | None, status: str = "ok", calls: bool = True) -> Generation:
        from rig.records import ParsedCall

        tc = [ParsedCall(name="f", arguments={})] if calls and status == "ok" else []
        return Generation(request_hash="h", call_form=form, parse_status=status, tool_calls=tc)  # type: ignore[arg-type]

    def ep(eid: str, hit: float, *gens: Generation) -> EpisodeResult:
        return EpisodeResult(
            benchmark="evgeoqa", episode_id=eid, repeat=0, generations=list(gens), scores={"hits@1": hit}
        )

    results = [
        ep("a", 1.0, g("bare"), g("bare")),
        ep("b", 1.0, g("fenced"), g("bare")),
        ep("c", 0.0, g(None, "no_call"), g("prose")),
        ep("d", 0.0, g(None, "no_call", calls=False), g(None, "parse_error")),
        ep("e", 0.0, g(None)),  # a call stored before rig recorded forms
    ]
    info = BenchmarkInfo(name="evgeoqa", version="1", data_path="x", data_hash="h", options={}, episodes=5)
    s = summarize(manifest(), results, info, EVGeoQA.headline)
    c = s.call_forms
    assert c is not None and c.reference == ["bare"]
    assert c.generations == {"bare": 3, "fenced": 1, "prose": 1, "no call read": 3, "not recorded": 1}
    assert c.episodes == {"bare": 2, "fenced": 1, "prose": 1, "no call read": 2, "not recorded": 1}
    assert c.rig_only == ["fenced", "prose"] and c.rig_only_episodes == 2
    assert c.rig_only_headline == pytest.approx(1.0 / 5)  # episode b's hit, over the five scored episodes
    t = call_form_table(s)
    assert t is not None and t.rows[0] == ["bare", 3, 2, "yes"] and ["fenced", 1, 1, "no"] in t.rows
    assert ["not recorded", 1, 1, "—"] in t.rows
    assert t.note is not None and "Read only by rig's loop: fenced, prose; 2 of 5 episodes" in t.note
    assert "contributing 0.200 of the headline mean 0.400" in t.note and "Wrong_Json" in t.note
    # a benchmark without calls (or the whole run) has no forms to count
    assert summarize(manifest(), [result("a", gen())], info, EVGeoQA.headline).call_forms is None
    assert summarize(manifest(), results).call_forms is None


# --- reliability over repeats and the failure taxonomy (issue 48) ------------------------------------------------

FIXTURE_RUN = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"


def test_an_old_run_without_repeat_seeds_reads_pass_k_not_measured_never_0(tmp_path: Path) -> None:
    """The recorded run stored no repeat seeds: every benchmark says pass^k is not measured and why, the report
    prints that instead of a number, and MLflow gets no pass^k metric but the reason."""
    import shutil

    from rig.integrations.mlflow_record import summary_metrics
    from rig.runfolder.folder import RunFolder

    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    for s in RunFolder(run).summaries():
        r = s.reliability
        assert r is not None and r.rows == [] and r.counts == {}
        assert r.reason is not None and "not measured" in r.reason and "seed" in r.reason
        metrics, reasons = summary_metrics(s.benchmark or "", s)
        assert not any("pass_hat" in k or "pass_at" in k for k in metrics)
        assert "seed" in reasons[f"{s.benchmark}/pass_hat_1"]
    md = report_markdown(run)
    assert md.count("| k = 1 | – | not measured | not measured |") == 5
    assert "Pass^k: not measured: results stored without their repeat's seed" in md


def test_at_temperature_0_repeats_are_identical_by_construction(tmp_path: Path) -> None:
    """n > 1 at temperature 0: pass^1 is the success rate, and k > 1 says why it is not measured rather than
    printing pass^k = pass^1."""
    from rig.runfolder.folder import RunFolder
    from tests.render.test_export import make_repeat_run

    r = RunFolder(make_repeat_run(tmp_path, repeats=3, temperature=0.0, n_eps=3)).summary("callnavi").reliability
    assert r is not None and [p.k for p in r.rows] == [1] and r.ks == [1, 3]
    assert r.reason is not None and "identical by construction" in r.reason


@pytest.mark.parametrize(("run_t", "option_t", "measured"), [(0.0, 0.1, [1, 3]), (0.7, 0.0, [1])])
def test_pass_k_reads_the_temperature_the_benchmark_sampled_at(
    run_t: float, option_t: float, measured: list[int]
) -> None:
    """MobilityBench samples every call at its own temperature option (the paper's 0.1), whatever the run's: repeats
    of a run at temperature 0 do differ, so pass^3 is measured; with the option at 0 they cannot, whatever the run's
    temperature, so it is not. The table says the temperature the repeats sampled at."""
    from rig.render.reliability import pass_k_table
    from rig.runfolder.config import BenchmarkInfo
    from rig.runfolder.summary import reliability

    m = manifest()
    m.config = m.config.model_copy(update={"repeats": 3, "temperature": run_t})
    info = BenchmarkInfo(
        name="mobilitybench", version="1", data_path="x", data_hash="h", options={"temperature": option_t}, episodes=2
    )
    results = [
        EpisodeResult(benchmark="mobilitybench", episode_id=e, repeat=k, seed=k, scores={"FPR": float(k != 1)})
        for e in ("a", "b")
        for k in range(3)
    ]
    r = reliability(m, results, info)
    assert [p.k for p in r.rows] == measured and r.temperature == option_t
    assert (r.reason is not None and "identical by construction" in r.reason) == (measured == [1])
    t = pass_k_table(summarize(m, results, info))
    assert t is not None and t.note is not None and f"n = 3 repeats per episode at temperature {option_t:g};" in t.note


def _check_one_class_each(run: Path) -> int:
    """Every result that is not a success has exactly one primary class of the taxonomy, and no reason is unmapped;
    returns how many failures there were."""
    from rig.runfolder.folder import RunFolder
    from rig.runfolder.summary import benchmark_of
    from rig.scoring.taxonomy import FAILURE_CLASSES

    folder, failures = RunFolder(run), 0
    for b in folder.benchmarks:
        bench, s = benchmark_of(b), folder.summary(b.name)
        assert s.failures is not None
        keys = [(f.episode_id, f.repeat) for f in s.failures.failures]
        assert len(keys) == len(set(keys))  # one class each
        missed = {(r.episode_id, r.repeat) for r in folder.results(b.name) if bench.success(r) is not True}
        assert set(keys) == missed, b.name
        assert all(f.primary in FAILURE_CLASSES and f.primary != "other" for f in s.failures.failures), b.name
        assert s.failures.unmapped() == [], (b.name, s.failures.unmapped())
        failures += len(keys)
    return failures


def test_every_failed_episode_of_the_embedded_models_five_benchmark_run_has_one_class() -> None:
    """The recorded run of the embedded gemma3-270m over all five benchmarks."""
    assert _check_one_class_each(FIXTURE_RUN) == 12


def test_every_failed_episode_of_a_fake_engine_five_benchmark_run_has_one_class(  # type: ignore[no-untyped-def]
    tmp_path, monkeypatch, helsinki_pack
) -> None:
    """`rig bench` over every benchmark with a fake engine, two repeats at temperature 0.7: each failure is
    classified, each repeat carries its own seed, and the screen says pass^2."""
    import re

    from typer.testing import CliRunner

    from rig.cli import app
    from rig.execution import bench
    from rig.runfolder.folder import RunFolder
    from tests.execution.killable import ThreadedFakeEngine

    monkeypatch.setenv("KILLABLE_DELAY", "0")
    monkeypatch.setattr(bench, "create_engine", lambda spec, weights, gpu=None: ThreadedFakeEngine(spec, weights))
    (tmp_path / "models.yaml").write_text(
        "models:\n  fake:\n    engine: llamacpp\n    weights: {file: w.gguf}\n    quantization: none\n"
        "    context_length: 4096\n"
    )
    (tmp_path / "w.gguf").write_bytes(b"")
    out = tmp_path / "runs"
    args = ["bench", "--models", str(tmp_path / "models.yaml"), "--model", "fake", "--limit", "1", "--repeats", "2"]
    r = CliRunner().invoke(app, [*args, "--temperature", "0.7", "--out", str(out)])
    assert r.exit_code == 0, r.output
    (run,) = out.iterdir()
    folder = RunFolder(run)
    assert [b.name for b in folder.benchmarks] == ["callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo"]
    assert {(x.repeat, x.seed) for x in folder.results()} == {(0, 0), (1, 1)}
    assert _check_one_class_each(run) > 0
    for b in folder.benchmarks:  # the one screen, with k > 1 measured
        assert re.search(rf"{b.name}: pass\^2 0\.000 \[0\.000, 0\.000\] over [12] episodes", r.output), r.output
