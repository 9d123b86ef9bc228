"""The run manifest: everything needed to reproduce or compare a run, written to runs/<id>/manifest.json."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, model_validator

import rig
from rig.inputs import read_json
from rig.records import validation_where, write_record
from rig.runfolder.config import RunConfig
from rig.runfolder.spec import RunSettings, RunSpec
from rig.runformat import MANIFEST_FORMAT, check_version
from rig.telemetry.energy import RunEnergy
from rig.telemetry.gpu import GpuMemorySummary
from rig.telemetry.mbu import WeightsProfile
from rig.telemetry.peak import BandwidthProbe


class HostInfo(BaseModel):
    hostname: str
    os: str
    python: str
    cpu: str
    cpu_count: int | None
    ram_bytes: int | None


RunStatus = Literal["running", "finished", "interrupted", "failed"]  # failed: a load error or a broken run


class RunManifest(BaseModel):
    format_version: int = MANIFEST_FORMAT
    run_id: str
    config_hash: str
    config: RunConfig
    rig_version: str = rig.__version__
    git_revision: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    host: HostInfo
    started_at: float
    finished_at: float | None = None
    status: RunStatus = "running"
    load_time_s: float | None = None
    engine_info: dict[str, Any] = Field(default_factory=dict)
    peak_rss_bytes: int | None = None
    gpu_memory: GpuMemorySummary | None = None
    energy: RunEnergy | None = None  # None: written before rig measured energy (format 1)
    bandwidth: BandwidthProbe | None = None  # the host's cached probe the run's MBU is set against
    bandwidth_reason: str | None = None  # why there is none
    weights_profile: WeightsProfile | None = None  # bytes and parameters touched per token, for MBU
    weights_reason: str | None = None
    # the loaded weights' sha256 (rig.weights_hash) or why there is none; both None: written before rig hashed them
    weights_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    weights_sha256_reason: str | None = None
    concurrency: int = 1
    order: str = "grouped"
    bundle_id: str | None = None  # the `rig bundle` whose models.yaml the run used: traces its weights and data files
    # The lab hosts the offline guard let through besides loopback (--allow-host, RIG_ALLOW_HOSTS), as HOST:PORT
    allowed_hosts: list[str] = Field(default_factory=list)
    # The run's settings as asked for (flags, a spec file or the library call); manifests written before it existed
    # have none, and run_spec() rebuilds it from their configuration.
    spec: RunSpec | None = None

    def run_spec(self) -> RunSpec:
        """The run's settings, for --resume and for whoever re-runs it: the recorded RunSpec, or for a manifest
        written before RunSpec existed, the one upgrade path: the settings its RunConfig resolved (the model's
        effective sampling as overrides, each benchmark's recorded options under its name when there were several).
        """
        if self.spec is not None:
            return self.spec
        c = self.config
        bs = c.benchmarks
        single = len(bs) == 1
        # Validated here: an old manifest's value a request may not ask for is refused, naming the field.
        return RunSpec.model_validate(
            c.model_dump(include=set(RunSettings.model_fields))
            | dict(
                model=c.model.name,
                benchmark=bs[0].name if single else None,
                data=Path(bs[0].data_path) if single else None,
                options=bs[0].options if single else {f"{b.name}.{k}": v for b in bs for k, v in b.options.items()},
                order=self.order,
                concurrency=self.concurrency,
            )
        )

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any, info: ValidationInfo) -> Any:
        """A stored manifest read in this rig's shape. One without a version was written before formats were
        versioned: format 1. Its benchmarks' ``settings`` (what runs wrote before typed options, read by nothing
        since) are dropped. (A manifest without a RunSpec: ``run_spec()``.) A bandwidth probe that fails today's
        checks (an earlier rig copied a damaged cache's negative or NaN peak) is dropped with the reason, so the run
        still reads and its MBU says why it is not given."""
        if not (info.context or {}).get("stored") or not isinstance(data, dict):
            return data
        if "format_version" not in data:
            data = {**data, "format_version": 1}
        config = data.get("config")
        if isinstance(config, dict) and isinstance(config.get("benchmarks"), list):
            benchmarks = [
                {k: v for k, v in b.items() if k != "settings"} if isinstance(b, dict) else b
                for b in config["benchmarks"]
            ]
            data = {**data, "config": {**config, "benchmarks": benchmarks}}
        if data.get("bandwidth") is not None:
            try:
                BandwidthProbe.model_validate(data["bandwidth"])
            except ValidationError as e:
                why = f"the run's recorded bandwidth probe is unusable ({validation_where(e) if e.errors() else e})"
                data = {**data, "bandwidth": None, "bandwidth_reason": why}
        return data

    @classmethod
    def begin(cls, run_id: str, config: RunConfig, **fields: Any) -> RunManifest:
        """A run starting now on this host, from this checkout, with its configuration's hash."""
        return cls(
            run_id=run_id,
            config_hash=config.digest(),
            config=config,
            git_revision=git_revision(),
            host=host_info(),
            started_at=time.time(),
            **fields,
        )

    def write(self, run_dir: Path) -> None:
        self.format_version = MANIFEST_FORMAT  # a resumed older run is rewritten in this rig's format
        write_record(run_dir / "manifest.json", self)

    @classmethod
    def read(cls, run_dir: Path) -> RunManifest:
        """Raises NewerFormatError for a manifest from a newer rig; one without format_version is format 1."""
        path = run_dir / "manifest.json"
        raw = read_json(path)  # bounded (rig.inputs): a FIFO, a huge or deeply nested file is an InputError
        found = raw.get("format_version", 1) if isinstance(raw, dict) else 1
        if isinstance(found, int):  # anything else is left to validation to refuse
            check_version(path, found, MANIFEST_FORMAT)
        # strict: a format_version "3" is refused, not read as 3 past the check above
        return cls.model_validate_json(json.dumps(raw), strict=True, context={"stored": True})


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
    with contextlib.suppress(ValueError, OSError, AttributeError):
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return HostInfo(
        hostname=platform.node(),
        os=platform.platform(),
        python=platform.python_version(),
        cpu=cpu,
        cpu_count=os.cpu_count(),
        ram_bytes=ram,
    )


def package_versions(
    names: tuple[str, ...] = (
        "pydantic",
        "numpy",
        "pyyaml",
        "llama-cpp-python",
        "vllm",
        "ollama",
        "nvidia-ml-py",
        "outlines",
    ),
) -> dict[str, str]:
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


# A run id is a folder name: file systems take 255 bytes. Each named part is cut to this many (the full names are in
# the manifest), so a long model name or --label cannot make the folder impossible to create.
RUN_ID_PART_BYTES = 80


def _id_part(text: str) -> str:
    clean = "".join("_" if c in "/\\" or ord(c) < 32 else c for c in text)
    return clean.encode("utf-8")[:RUN_ID_PART_BYTES].decode("utf-8", "ignore")


def new_run_id(model: str, benchmark: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    salt = hashlib.sha256(f"{time.time_ns()}{os.getpid()}".encode()).hexdigest()[:4]
    return f"{stamp}-{_id_part(model)}-{_id_part(benchmark)}-{salt}"
