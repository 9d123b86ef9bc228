from rig.doctor import run_checks


def test_doctor_reports_guard_data_and_weights(callnavi_data) -> None:  # type: ignore[no-untyped-def]
    rows = {name: (status, detail) for name, status, detail in run_checks(data=callnavi_data)}
    assert rows["offline guard"][0] == "ok"
    assert rows["callnavi --data"] == ("ok", f"{callnavi_data}: 729 questions")
    assert rows["callnavi embedded sample"][0] == "ok"
    assert rows["weights qwen3-8b-ollama-q4"][0] == "skip"
    assert rows["GPUs (NVML)"][0] in ("ok", "warn")


def test_doctor_fails_on_bad_data(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rows = {name: (status, detail) for name, status, detail in run_checks(data=tmp_path)}
    assert rows["callnavi --data"][0] == "fail" and "Questions" in rows["callnavi --data"][1]


def test_llamacpp_smoke_runs_the_embedded_model(embedded_weights: str) -> None:
    from rig.doctor import _llamacpp_row

    _label, status, detail = _llamacpp_row(None)
    assert status == "ok", detail


def test_llamacpp_smoke_names_the_rebuild_when_the_child_crashes(embedded_weights: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import rig.doctor as d

    monkeypatch.setattr(d, "_SMOKE", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    _label, status, detail = d._llamacpp_row(None)
    assert status == "fail" and "signal 11" in detail and d.PORTABLE_CMAKE_ARGS in detail
    assert "--force-reinstall" in detail


def test_doctor_bandwidth_measures_with_conditions_and_keeps_the_best_peak(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from rig.cli import app
    from rig.doctor import bandwidth_rows
    from rig.telemetry import bandwidth, peak
    from tests.telemetry.test_peak import probe_record

    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    small = bandwidth.probe_cpu
    monkeypatch.setattr(bandwidth, "probe_cpu", lambda: small(buffer_bytes=32 * 2**20, passes=2))
    first = CliRunner().invoke(app, ["doctor", "--bandwidth"])
    assert first.exit_code == 0, first.output
    assert "GB/s: streaming read" in first.output and "probe conditions" in first.output
    probe, why = peak.cached_probe(None)
    assert why is None and probe is not None and probe.bytes_per_s > 0 and probe.flops_per_s
    assert probe.conditions is not None and probe.conditions.others_share is not None
    # a higher cached peak (this host's own, quiet) is kept; the doctor says so
    peak.save_probe(probe_record(bps=1e14))
    rows = {n: (s, d) for n, s, d in bandwidth_rows()}
    assert rows["bandwidth cpu"][1].endswith(" UTC)") and "(measured, " in rows["bandwidth cpu"][1]
    assert rows["probe conditions"][1].startswith("CPU probe of ")
    status, detail = rows["bandwidth peak"]
    assert status == "ok" and detail.startswith("the cached 100000.00 GB/s (CPU probe of") and "is kept" in detail
    assert peak.cached_probe(None)[0].bytes_per_s == 1e14  # type: ignore[union-attr]


def test_doctor_suggests_refresh_for_a_marked_or_old_peak(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import time

    from rig.doctor import _bandwidth_row, bandwidth_rows
    from rig.telemetry import bandwidth, peak
    from tests.telemetry.test_peak import probe_record

    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    assert _bandwidth_row() == (
        "bandwidth peak cpu",
        "skip",
        "no bandwidth probe for this host: run `rig doctor --bandwidth` once on this host",
    )
    peak.save_probe(probe_record(bps=31e9))
    _, status, detail = _bandwidth_row()
    assert status == "ok" and detail.startswith("31.00 GB/s (CPU probe of ") and "quiet" in detail
    for doubtful, words in (
        (probe_record(bps=31e9, contended=True), "in doubt: it was taken under load: other processes used 60%"),
        (probe_record(bps=31e9, at=time.time() - 45 * 86400), "in doubt: it is 45 days old (over 30)"),
    ):
        peak.save_probe(doubtful)
        _, status, detail = _bandwidth_row()
        assert status == "warn" and words in detail, detail
        assert detail.endswith("run `rig doctor --bandwidth --refresh` on a quiet host")
        # a lower probe keeps the doubtful peak: --bandwidth says so and suggests --refresh too
        monkeypatch.setattr(bandwidth, "probe_cpu", lambda: probe_record(bps=20e9))
        rows = {n: (s, d) for n, s, d in bandwidth_rows()}
        status, detail = rows["bandwidth peak"]
        assert status == "warn" and "is kept" in detail and words in detail
        assert detail.endswith("run `rig doctor --bandwidth --refresh` on a quiet host")
    peak.cache_path().write_text("[")
    _, status, detail = _bandwidth_row()
    assert status == "warn" and detail.startswith(f"damaged bandwidth cache ignored ({peak.cache_path()}: ")
    rows = {(n, s): d for n, s, d in bandwidth_rows()}
    assert rows[("bandwidth cache", "warn")].endswith("; rewritten with this probe")


def test_doctor_names_a_cache_it_cannot_write(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from rig.cli import app
    from rig.telemetry import bandwidth, peak
    from tests.telemetry.test_peak import probe_record

    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    peak.cache_path().mkdir(parents=True)
    monkeypatch.setattr(bandwidth, "probe_cpu", lambda: probe_record())
    r = CliRunner().invoke(app, ["doctor", "--bandwidth"])
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.exception  # a named failure, no traceback
    assert "cannot write the" in r.output


def test_doctor_bandwidth_flags_are_checked(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from rig.cli import app

    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    r = CliRunner().invoke(app, ["doctor", "--bandwidth", "--gpu", "-1"])
    assert r.exit_code == 2 and "--gpu -1: must be 0 or more" in r.output
    r = CliRunner().invoke(app, ["doctor", "--refresh"])
    assert r.exit_code == 2 and "--gpu and --refresh go with --bandwidth" in r.output
    assert not (tmp_path / "bandwidth").exists()


def test_doctor_checks_the_data_of_the_benchmark_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The data check goes through the benchmark's own interface, for any benchmark (questions counted as --limit
    counts them), not CallNavi's loader alone."""
    rows = {name: (status, detail) for name, status, detail in run_checks(data=tmp_path, benchmark="routeeval")}
    assert rows["routeeval embedded sample"][0] == "ok" and rows["routeeval embedded sample"][1].endswith("questions")
    assert rows["routeeval --data"][0] == "fail"
    assert not any(name.startswith("callnavi") for name in rows)
