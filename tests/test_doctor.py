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


def test_doctor_bandwidth_probes_once_then_reads_the_cache(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from rig.cli import app
    from rig.telemetry import bandwidth

    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    small = bandwidth.probe_cpu
    monkeypatch.setattr(bandwidth, "probe_cpu", lambda: small(buffer_bytes=32 * 2**20, passes=2))
    first = CliRunner().invoke(app, ["doctor", "--bandwidth"])
    assert first.exit_code == 0, first.output
    assert "GB/s: streaming read" in first.output and "(measured," in first.output
    probe, why = bandwidth.cached_probe(None)
    assert why is None and probe is not None and probe.bytes_per_s > 0 and probe.flops_per_s
    again = CliRunner().invoke(app, ["doctor", "--bandwidth"])
    assert again.exit_code == 0 and "(cached," in again.output


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
