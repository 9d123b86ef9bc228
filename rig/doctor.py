"""`rig doctor`: what is installed and reachable, without loading a model."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

from rig import offline
from rig.engines import ENGINES

Row = tuple[str, str, str]


def run_checks(data: Path | None = None, models_file: Path | None = None) -> list[Row]:
    rows: list[Row] = []
    for name, (_t, module, extra) in ENGINES.items():
        found = importlib.util.find_spec(module) is not None
        rows.append((f"engine {name}", "ok" if found else "warn",
                     f"module {module} importable" if found else f"not installed: pip install 'rig[{extra}]'"))
    rows.append(_gpu_row())
    rows.append(_offline_row())
    from rig.registry import RegistryError, load_registry, weights_present

    try:
        reg = load_registry(models_file)
        rows.append(("models.yaml", "ok", f"{reg.path}: {len(reg.models)} models"))
        for nm, spec in reg.models.items():
            if spec.weights.kind in ("ollama", "served"):
                rows.append((f"weights {nm}", "skip", f"{spec.weights.ref}: checked against the server when a run loads"))
                continue
            ok, detail = weights_present(spec, reg.path)
            rows.append((f"weights {nm}", "ok" if ok else "warn", detail if not ok else spec.weights.ref))
    except RegistryError as e:
        rows.append(("models.yaml", "fail", str(e)))
    from rig.benchmarks.base import DataError
    from rig.benchmarks.callnavi.benchmark import CallNavi

    for label, path in (("callnavi embedded sample", None), ("callnavi --data", data)):
        if label.endswith("--data") and data is None:
            continue
        try:
            b = CallNavi(path)
            rows.append((label, "ok", f"{b.data}: {len(b.episodes()) // 2} questions"))
        except DataError as e:
            rows.append((label, "fail", str(e)))
    return rows


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
        hooked = socket.socket.connect is offline.guarded_connect
        if hooked:
            return ("offline guard", "ok", "hub offline switches set; non-loopback connections refused")
        return ("offline guard", "fail", "socket.connect is not guarded")
    return ("offline guard", "fail", "a non-loopback address was not refused")
