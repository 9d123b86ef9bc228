import pytest

from rig.telemetry.gpu import GpuSampler, nvml_index_for


def test_cpu_run_records_unavailable_with_reason() -> None:
    s = GpuSampler(None)
    s.start()
    s.mark_loaded()
    summ = s.stop()
    assert not summ.available and "CPU" in summ.reason
    assert summ.peak_bytes is None and summ.load_bytes is None  # never a fake zero


def test_no_driver_records_unavailable_and_goes_on() -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present here")
    except ImportError:
        pass
    except Exception:
        pass
    s = GpuSampler(0)
    s.start()
    summ = s.stop()
    assert not summ.available and summ.reason
    assert summ.peak_bytes is None


@pytest.mark.parametrize(
    "visible, gpu, expect",
    [(None, 1, (1, None)), ("3,1", 1, (1, None)), ("GPU-abc,GPU-def", 0, (None, "GPU-abc")), ("0", 2, (None, None))],
)
def test_cuda_visible_devices_mapping(monkeypatch: pytest.MonkeyPatch, visible, gpu, expect) -> None:  # type: ignore[no-untyped-def]
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert nvml_index_for(gpu) == expect


@pytest.mark.gpu
def test_nvml_sampler_on_a_real_gpu() -> None:
    s = GpuSampler(0, interval_s=0.05)
    s.start()
    s.mark_loaded()
    summ = s.stop()
    assert summ.available and summ.total_bytes and summ.peak_bytes >= summ.baseline_bytes > 0
