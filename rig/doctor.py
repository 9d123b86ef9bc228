"""`rig doctor`: what is installed and reachable; the only model it loads is the embedded one, in a subprocess."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rig import offline, plugins

if TYPE_CHECKING:
    from rig.telemetry.peak import BandwidthProbe
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
    """Engines, plugins, llama.cpp, GPUs, the guard, models.yaml and weights; then one benchmark's data (``benchmark``,
    default ``DEFAULT_BENCHMARK``): its embedded sample and, with ``data``, that folder."""
    rows = engine_rows() + _plugin_rows()
    rows.append(_llamacpp_row(models_file))
    rows.append(_gpu_row())
    rows.append(_offline_row())
    rows.append(_bandwidth_row())
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


def engine_rows() -> list[Row]:
    """rig's own engines, as the registry lists them: whether each one's backend module is installed (looked up,
    not imported)."""
    rows: list[Row] = []
    for name, entry in plugins.own(plugins.ENGINE_GROUP).items():
        found = entry.needs is None or importlib.util.find_spec(entry.needs) is not None
        rows.append(
            (
                f"engine {name}",
                "ok" if found else "warn",
                f"module {entry.needs} importable" if found else f"not installed: pip install 'rig[{entry.extra}]'",
            )
        )
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


def _plugin_rows() -> list[Row]:
    """Engines and benchmarks of installed packages: each imported and checked, each one left out with why."""
    return [row for group in plugins.GROUPS for row in plugins.listing(group)]


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
    try:
        offline.install()
    except offline.AllowListError as e:  # the guard goes on all the same, with no lab host let through
        offline.install(env=False)
        return ("offline guard", "fail", f"{e}; until it is fixed, every rig command that reads it refuses to start")
    # Ask the guard directly rather than opening a socket: a doctor must send no packet even if the guard broke.
    try:
        offline.check_address(("192.0.2.1", 80))
    except offline.NetworkRefused:
        if offline.is_installed():
            return ("offline guard", "ok", "hub offline switches set; non-loopback connections and lookups refused")
        return ("offline guard", "fail", "the socket audit hook is not installed")
    return ("offline guard", "fail", "a non-loopback address was not refused")


def bandwidth_rows(gpu: int | None = None, refresh: bool = False) -> list[Row]:
    """`rig doctor --bandwidth`: measure the device's peak read bandwidth and matmul FLOP/s now, with the conditions;
    the per-host cache (what runs set their MBU against) keeps the best peak seen, or this one with ``refresh``."""
    from rig.telemetry.bandwidth import CacheError, probe
    from rig.telemetry.peak import cache_path, describe, utc

    dev = "cpu" if gpu is None else f"gpu:{gpu}"
    label = f"bandwidth {dev}"
    try:
        o = probe(gpu, refresh=refresh)
    except ImportError as e:
        return [(label, "fail", f"the GPU probe needs torch ({e})")]
    except CacheError as e:
        return [("bandwidth cache", "fail", str(e))]
    except Exception as e:  # no CUDA device, out of memory: the probe's failure, not rig's
        return [(label, "fail", f"probe failed: {type(e).__name__}: {e}")]
    m = o.measured
    marked = m.conditions is not None and m.conditions.contended
    rows: list[Row] = [
        (
            label,
            "ok",
            f"{m.bytes_per_s / 1e9:.2f} GB/s: {m.method} on {m.device_name} (measured, {utc(m.measured_at)})",
        ),
        ("probe conditions", "warn" if marked else "ok", describe(m)),
        (
            f"matmul {dev}",
            "ok" if m.flops_per_s else "warn",
            f"{m.flops_per_s / 1e9:.1f} GFLOP/s: {m.flops_method}" if m.flops_per_s else "not measured",
        ),
    ]
    if gpu is not None:
        rows.append(
            (
                "NVML data-sheet bandwidth",
                "ok" if m.nvml_bytes_per_s else "warn",
                f"{m.nvml_bytes_per_s / 1e9:.0f} GB/s (max memory clock x bus width)"
                if m.nvml_bytes_per_s
                else f"not measured ({m.nvml_reason})",
            )
        )
    if o.cache_problem:
        rows.append(("bandwidth cache", "warn", f"{o.cache_problem}; rewritten with this probe"))
    rows.append(_peak_row(o.action, o.peak, o.previous))
    rows.append(("bandwidth cache", "ok", f"{cache_path()}: runs on this host set their MBU against it"))
    return rows


def _peak_row(action: str, peak: BandwidthProbe, previous: BandwidthProbe | None) -> Row:
    """What the cache holds after a probe, and whether that peak is in doubt (then how to replace it)."""
    from rig.telemetry.peak import REFRESH_HINT, describe, peak_doubts

    gbs = f"{peak.bytes_per_s / 1e9:.2f} GB/s"
    before = "" if previous is None else f"{previous.bytes_per_s / 1e9:.2f} GB/s ({describe(previous)})"
    text = {
        "first": f"{gbs}, this probe's, cached for this host's runs",
        "replaced": f"{gbs}, this probe's, replaces the cached {before}: a peak is the best seen",
        "refreshed": f"{gbs}, this probe's, replaces the cached {before} (--refresh)",
        "kept": f"the cached {before} is kept: a peak is the best seen and this probe was lower (--refresh replaces "
        "it)",
    }[action]
    doubts = peak_doubts(peak)
    if doubts:
        return ("bandwidth peak", "warn", f"{text}; in doubt: {'; '.join(doubts)}; {REFRESH_HINT}")
    return ("bandwidth peak", "ok", text)


def _bandwidth_row() -> Row:
    """The CPU's cached peak as runs will use it, without probing: missing, damaged, or in doubt says what to run."""
    from rig.telemetry.peak import REFRESH_HINT, cached_probe, describe, peak_doubts

    peak, why = cached_probe(None)
    if peak is None:
        return ("bandwidth peak cpu", "skip" if (why or "").startswith("no bandwidth probe") else "warn", why or "")
    text = f"{peak.bytes_per_s / 1e9:.2f} GB/s ({describe(peak)})"
    doubts = peak_doubts(peak)
    if doubts:
        return ("bandwidth peak cpu", "warn", f"{text}; in doubt: {'; '.join(doubts)}; {REFRESH_HINT}")
    return ("bandwidth peak cpu", "ok", text)
