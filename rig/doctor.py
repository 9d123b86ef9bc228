"""`rig doctor`: what is installed and reachable; the only model it loads is the embedded one, in a subprocess."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rig import offline
from rig.engines import ENGINES

if TYPE_CHECKING:
    from rig.weight_parts import Parts

Row = tuple[str, str, str]

# A portable CPU build of llama.cpp (AVX2 level, no AMX): a native build on a host whose CPU reports AMX can crash
# inside a VM that does not let it use AMX (SIGSEGV at the first matrix multiply).
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
_SMOKE = """
import sys, llama_cpp
llm = llama_cpp.Llama(sys.argv[1], n_ctx=64, n_batch=32, verbose=False)
print(len(list(zip(range(2), llm.generate(llm.tokenize(b"Hello"), temp=0.0)))))
"""


def run_checks(data: Path | None = None, models_file: Path | None = None, benchmark: str | None = None) -> list[Row]:
    """Engines, llama.cpp, GPUs, the guard, models.yaml and weights; then one benchmark's data (``benchmark``,
    default ``DEFAULT_BENCHMARK``): its embedded sample and, with ``data``, that folder."""
    rows: list[Row] = []
    for name, (_t, module, extra) in ENGINES.items():
        found = importlib.util.find_spec(module) is not None
        rows.append(
            (
                f"engine {name}",
                "ok" if found else "warn",
                f"module {module} importable" if found else f"not installed: pip install 'rig[{extra}]'",
            )
        )
    rows.append(_llamacpp_row(models_file))
    rows.append(_gpu_row())
    rows.append(_offline_row())
    from rig.registry import RegistryError, load_registry, weights_present

    try:
        reg = load_registry(models_file)
        rows.append(("models.yaml", "ok", f"{reg.path}: {len(reg.models)} models"))
        for nm, spec in reg.models.items():
            if spec.weights.kind in ("ollama", "served"):
                rows.append(
                    (f"weights {nm}", "skip", f"{spec.weights.ref}: checked against the server when a run loads")
                )
                continue
            if spec.weights.parts is not None:
                rows.append(_parts_row(f"weights {nm}", spec.weights.parts))
                continue
            ok, detail = weights_present(spec, reg.path)
            rows.append((f"weights {nm}", "ok" if ok else "warn", detail if not ok else spec.weights.ref))
    except RegistryError as e:
        rows.append(("models.yaml", "fail", str(e)))
    rows += _data_rows(benchmark, data)
    return rows


def _parts_row(label: str, parts: Parts) -> Row:
    """A model joined from part packages: assembled and verified (a cached file without its stamp is hashed here, so
    a truncated or altered one fails), its parts installed, or which parts are missing."""
    from rig.weight_parts import PartsError, status

    try:
        st = status(parts, rehash=True)
    except PartsError as e:
        return (label, "fail", str(e))
    return (label, "warn" if st.state == "missing" else "ok", st.detail)


def _data_rows(benchmark: str | None, data: Path | None) -> list[Row]:
    """Whether the benchmark's embedded sample (and ``data``, when given) loads, and how many questions it holds (a
    question's tasks counted once, as ``--limit`` counts them)."""
    from rig.benchmarks import DEFAULT_BENCHMARK, get_benchmark_class
    from rig.benchmarks.base import DataError

    name = benchmark or DEFAULT_BENCHMARK
    cls = get_benchmark_class(name)
    rows: list[Row] = []
    for label, path in ((f"{name} embedded sample", None), (f"{name} --data", data)):
        if label.endswith("--data") and data is None:
            continue
        try:
            b = cls(path)
            questions = {e.tags.get("question", e.id) for e in b.episodes()}
            rows.append((label, "ok", f"{b.data}: {len(questions)} questions"))
        except DataError as e:
            rows.append((label, "fail", str(e)))
    return rows


def _llamacpp_row(models_file: Path | None) -> Row:
    """Two tokens from the embedded model in a child process: a crashing CPU kernel kills the child, not rig."""
    label = "llama.cpp runs here"
    if importlib.util.find_spec("llama_cpp") is None:
        return (label, "skip", "llama-cpp-python not installed")
    from rig.registry import RegistryError, load_registry, resolve_weights

    try:
        reg = load_registry(models_file)
        weights = resolve_weights(reg.get("gemma3-270m"), reg.path)
    except (RegistryError, KeyError) as e:
        return (label, "skip", f"embedded model not available ({e})")
    try:
        p = subprocess.run([sys.executable, "-c", _SMOKE, weights], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return (label, "warn", "two tokens from gemma3-270m took over 300 s")
    if p.returncode == 0 and p.stdout.strip() == "2":
        return (label, "ok", "gemma3-270m generated two tokens on the CPU")
    from importlib.metadata import version

    how = f"signal {-p.returncode}" if p.returncode < 0 else f"exit code {p.returncode}"
    return (
        label,
        "fail",
        f"gemma3-270m crashed ({how}): this llama-cpp-python build does not run on this CPU; "
        f'rebuild it portable: CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install --no-cache-dir '
        f"--force-reinstall --no-deps llama-cpp-python=={version('llama-cpp-python')}",
    )


def _gpu_row() -> Row:
    try:
        import pynvml
    except ImportError:
        return ("GPUs (NVML)", "warn", "nvidia-ml-py not installed: GPU memory will be 'not measured'")
    try:
        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(n)]
        pynvml.nvmlShutdown()
        return ("GPUs (NVML)", "ok", ", ".join(str(x) for x in names) or "none")
    except Exception as e:
        return ("GPUs (NVML)", "warn", f"unavailable ({e}); CPU runs only, GPU memory 'not measured'")


def _offline_row() -> Row:
    offline.install()
    # Ask the guard directly rather than opening a socket: a doctor must send no packet even if the guard broke.
    try:
        offline.check_address(("192.0.2.1", 80))
    except offline.NetworkRefused:
        if offline.is_installed():
            return ("offline guard", "ok", "hub offline switches set; non-loopback connections and lookups refused")
        return ("offline guard", "fail", "the socket audit hook is not installed")
    return ("offline guard", "fail", "a non-loopback address was not refused")


def bandwidth_rows(gpu: int | None = None, refresh: bool = False) -> list[Row]:
    """`rig doctor --bandwidth`: the device's peak read bandwidth and matmul FLOP/s, cached per host for MBU."""
    import time

    from rig.telemetry.bandwidth import cache_path, probe

    label = f"bandwidth {'cpu' if gpu is None else f'gpu:{gpu}'}"
    try:
        p, how = probe(gpu, refresh=refresh)
    except ImportError as e:
        return [(label, "fail", f"the GPU probe needs torch ({e})")]
    except Exception as e:  # no CUDA device, out of memory: the probe's failure, not rig's
        return [(label, "fail", f"probe failed: {type(e).__name__}: {e}")]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(p.measured_at))
    rows: list[Row] = [
        (label, "ok", f"{p.bytes_per_s / 1e9:.2f} GB/s: {p.method} on {p.device_name} ({how}, {when})"),
        (
            f"matmul {'cpu' if gpu is None else f'gpu:{gpu}'}",
            "ok" if p.flops_per_s else "warn",
            f"{p.flops_per_s / 1e9:.1f} GFLOP/s: {p.flops_method}" if p.flops_per_s else "not measured",
        ),
    ]
    if gpu is not None:
        rows.append(
            (
                "NVML data-sheet bandwidth",
                "ok" if p.nvml_bytes_per_s else "warn",
                f"{p.nvml_bytes_per_s / 1e9:.0f} GB/s (max memory clock x bus width)"
                if p.nvml_bytes_per_s
                else f"not measured ({p.nvml_reason})",
            )
        )
    rows.append(("bandwidth cache", "ok", f"{cache_path()}: runs on this host set their MBU against it"))
    return rows
