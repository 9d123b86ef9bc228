"""The run manifest: everything needed to reproduce or compare a run, written to runs/<id>/manifest.json."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

import rig
from rig.registry import ModelSpec
from rig.telemetry.gpu import GpuMemorySummary


class HostInfo(BaseModel):
    hostname: str
    os: str
    python: str
    cpu: str
    cpu_count: int | None
    ram_bytes: int | None


class BenchmarkInfo(BaseModel):
    name: str
    version: str
    data_path: str
    data_hash: str
    options: dict[str, Any] = Field(default_factory=dict)  # the benchmark's validated Options, defaults included
    settings: dict[str, Any] = Field(default_factory=dict)  # written by runs before typed options; read, never written
    episodes: int = 0


class RunConfig(BaseModel):
    """What must not change between a run and its resumption; hashed into config_hash."""

    model: ModelSpec
    benchmarks: list[BenchmarkInfo]
    repeats: int
    limit: int | None
    decode: str
    tool_mode: str
    seed: int
    temperature: float
    max_tokens: int
    gpu: int | None

    def digest(self) -> str:
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class RunManifest(BaseModel):
    run_id: str
    config_hash: str
    config: RunConfig
    rig_version: str = rig.__version__
    git_revision: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    host: HostInfo
    started_at: float
    finished_at: float | None = None
    status: str = "running"  # running | finished | interrupted
    load_time_s: float | None = None
    engine_info: dict[str, Any] = Field(default_factory=dict)
    peak_rss_bytes: int | None = None
    gpu_memory: GpuMemorySummary | None = None
    concurrency: int = 1
    order: str = "grouped"

    def write(self, run_dir: Path) -> None:
        tmp = run_dir / "manifest.json.tmp"
        tmp.write_text(self.model_dump_json(indent=2))
        os.replace(tmp, run_dir / "manifest.json")

    @classmethod
    def read(cls, run_dir: Path) -> "RunManifest":
        return cls.model_validate_json((run_dir / "manifest.json").read_text())


def host_info() -> HostInfo:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = None
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    return HostInfo(
        hostname=platform.node(), os=platform.platform(), python=platform.python_version(),
        cpu=cpu, cpu_count=os.cpu_count(), ram_bytes=ram,
    )


def package_versions(names: tuple[str, ...] = ("pydantic", "numpy", "pyyaml", "llama-cpp-python", "vllm",
                                                "ollama", "nvidia-ml-py", "outlines")) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_revision() -> str | None:
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return r.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def new_run_id(model: str, benchmark: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    salt = hashlib.sha256(f"{time.time_ns()}{os.getpid()}".encode()).hexdigest()[:4]
    return f"{stamp}-{model}-{benchmark}-{salt}".replace("/", "_")


def hash_paths(paths: list[Path]) -> str:
    """Content hash of data files, order-independent of the filesystem."""
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]
