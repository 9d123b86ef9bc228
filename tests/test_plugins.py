"""Engines and benchmarks from installed packages (entry points `rig.engines` and `rig.benchmarks`): a tiny plugin
distribution found, run end to end, and broken ones named with their distribution without stopping rig's own."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import logging
import os
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig import plugins
from rig.benchmarks import BENCHMARKS, benchmark_classes, benchmark_names, get_benchmark_class
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.engines import ENGINES, engine_class, engine_names

REPO = Path(__file__).resolve().parents[1]


class OwnSums(CallNavi):
    """A benchmark registered as rig's own are: one entry in the registry."""

    name = "ownsums"


# A lab's package: an engine that adds the two numbers of a prompt "a+b", and a benchmark of such sums.
TOY = '''"""Sums: a toy rig plugin."""
from pathlib import Path

from rig.agents.single import single_call
from rig.benchmarks.base import Benchmark, Table
from rig.engines.base import Capabilities, Engine, Reply
from rig.records import Episode, EpisodeResult, Generation, Message, Timings


class SumEngine(Engine):
    name = "sum_engine"

    @property
    def capabilities(self):
        return Capabilities()

    async def load(self):
        return None

    async def generate(self, request):
        a, b = request.messages[-1].content.split("+")
        text = str(int(a) + int(b)) if int(a) < 2 else "no idea"
        timings = Timings(e2e_s=0.001, ttft_s=0.001)
        gen = Generation(request_hash=request.digest(), text=text, prompt_tokens=3, completion_tokens=1,
                         timings=timings, finish_reason="stop")
        return Reply(gen)


class Sums(Benchmark):
    name = "sums"
    headline_name = "exact sum"

    @classmethod
    def default_data(cls):
        return Path(__file__).parent

    def episodes(self):
        return [Episode(benchmark=self.name, id=f"q{i}", messages=[Message(role="user", content=f"{i}+{i * i}")],
                        ground_truth=str(i + i * i)) for i in range(4)]

    def data_hash(self):
        return "sums-1"

    async def run_episode(self, episode, engine, ctx, repeat):
        gen = await single_call(engine, episode, ctx.sampling)
        exact = float(gen.text.strip() == episode.ground_truth)
        return EpisodeResult(benchmark=self.name, episode_id=episode.id, repeat=repeat, generations=[gen],
                             output=gen.text, scores={"exact": exact})

    @classmethod
    def tables(cls, results, options, label=""):
        rate = sum(r.scores["exact"] or 0.0 for r in results) / max(len(results), 1)
        return [Table(title="Sums", columns=["Model", "exact sum"], rows=[[label, round(rate, 3)]])]

    @classmethod
    def headline(cls, result):
        return result.scores.get("exact")
'''
TOY_ENTRY_POINTS = {"rig.engines": {"sum_engine": "toy_sums:SumEngine"}, "rig.benchmarks": {"sums": "toy_sums:Sums"}}

# A package whose plugins are all broken: an import error, the wrong type, a built-in's name, a class declaring
# another name than its entry point.
BROKEN = {
    "broken_imports.py": "import a_module_that_is_not_installed\n",
    "broken_types.py": (
        "from rig.benchmarks.base import Benchmark\n\n"
        "class NotABenchmark:\n    name = 'wrong_type'\n\n"
        "class Misnamed(Benchmark):\n    name = 'other'\n"
    ),
}
BROKEN_ENTRY_POINTS = {
    "rig.engines": {"ghost_engine": "broken_imports:Engine", "llamacpp": "broken_types:NotABenchmark"},
    "rig.benchmarks": {
        "crashes": "broken_imports:Bench",
        "wrong_type": "broken_types:NotABenchmark",
        "misnamed": "broken_types:Misnamed",
        "callnavi": "broken_types:NotABenchmark",
    },
}

MODELS = (
    "models:\n  toy:\n    engine: sum_engine\n    weights: {served: toy}\n    quantization: none\n"
    "    context_length: 1024\n"
)


def _entry_points(groups: dict[str, dict[str, str]]) -> str:
    return "".join(f"[{g}]\n" + "".join(f"{n} = {t}\n" for n, t in eps.items()) + "\n" for g, eps in groups.items())


def _dist_files(name: str, modules: dict[str, str], groups: dict[str, dict[str, str]]) -> dict[str, str]:
    """The files of an installed distribution `name` 0.1: its modules and its .dist-info."""
    info = f"{name}-0.1.dist-info"
    return {
        **modules,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
        f"{info}/entry_points.txt": _entry_points(groups),
    }


def write_wheel(out: Path, name: str, modules: dict[str, str], groups: dict[str, dict[str, str]]) -> Path:
    """A pure-Python wheel written by hand (what a build backend makes from a pyproject.toml declaring these entry
    points), so the test needs neither a build backend nor an index."""
    files = _dist_files(name, modules, groups)
    info = f"{name}-0.1.dist-info"
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: rig-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

    def record(path: str, text: str) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        return f"{path},sha256={digest},{len(text.encode())}\n"

    files[f"{info}/RECORD"] = "".join(record(p, t) for p, t in files.items()) + f"{info}/RECORD,,\n"
    wheel = out / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The toy and the broken distribution on sys.path as installed packages (a site folder of .dist-info's)."""
    site = tmp_path / "site"
    for name, modules, groups in (
        ("toy-sums", {"toy_sums.py": TOY}, TOY_ENTRY_POINTS),
        ("broken-plugins", BROKEN, BROKEN_ENTRY_POINTS),
    ):
        for path, text in _dist_files(name, modules, groups).items():
            (site / path).parent.mkdir(parents=True, exist_ok=True)
            (site / path).write_text(text)
    monkeypatch.syspath_prepend(str(site))
    plugins.discover.cache_clear()
    yield site
    plugins.discover.cache_clear()
    for module in ("toy_sums", "broken_types", "broken_imports"):
        sys.modules.pop(module, None)


def test_an_installed_package_adds_an_engine_and_a_benchmark(installed: Path) -> None:
    assert "sum_engine" in engine_names() and "sums" in benchmark_names()
    assert engine_class("sum_engine").__module__ == "toy_sums"
    assert get_benchmark_class("sums").headline_name == "exact sum"
    from rig.registry import load_registry

    (installed / "models.yaml").write_text(MODELS)
    assert load_registry(installed / "models.yaml").get("toy").engine == "sum_engine"  # models.yaml may name it


def test_a_plugins_failures_fall_into_other_and_are_named_unmapped(installed: Path) -> None:
    """A plugin that maps none of its reasons: each failure's class is "other", its reason kept as the detail, and
    the report's taxonomy table names the reason as one the benchmark does not map."""
    from rig.records import EpisodeResult
    from rig.render.reliability import failure_table
    from rig.runfolder.summary import RunSummary, failures

    sums = get_benchmark_class("sums")
    wrong = EpisodeResult(benchmark="sums", episode_id="q3", repeat=0, scores={"exact": 0.0})
    right = EpisodeResult(benchmark="sums", episode_id="q1", repeat=0, scores={"exact": 1.0})
    assert sums.success(right) is True and sums.success(wrong) is False
    assert sums.failure_class(wrong) == ("other", "wrong answer", False)
    taxonomy = failures([right, wrong], sums)
    assert [(f.episode_id, f.primary) for f in taxonomy.failures] == [("q3", "other")]
    fields = {n: None for n, f in RunSummary.model_fields.items() if f.is_required()}
    summary = RunSummary.model_construct(**fields, failures=taxonomy)
    table = failure_table(summary)
    assert table is not None and table.rows == [["other", 1, "50.0%", "wrong answer (1)"]]
    assert "Reasons the benchmark does not map (counted as other): wrong answer" in (table.note or "")


def test_broken_plugins_are_named_with_their_distribution_and_rigs_own_still_load(
    installed: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        names = benchmark_names()
        classes = benchmark_classes()
    # a built-in's name stays the built-in's, and the package that claimed it is named
    assert get_benchmark_class("callnavi").__module__ == "rig.benchmarks.callnavi.benchmark"
    assert engine_class.__module__ == "rig.engines" and "llamacpp" in engine_names()
    said = caplog.text
    assert "benchmark plugin 'callnavi' (broken_types:NotABenchmark) from broken-plugins 0.1 ignored" in said
    # every built-in loads; the broken plugins are left out of a run of all, each named with its distribution
    assert set(BENCHMARKS) <= set(classes) and "sums" in classes
    assert not {"crashes", "wrong_type", "misnamed"} & set(classes) and {"crashes", "wrong_type"} <= set(names)
    assert "benchmark plugin 'crashes' (broken_imports:Bench) from broken-plugins 0.1: cannot be imported" in said
    with pytest.raises(plugins.PluginError, match=r"from broken-plugins 0\.1: is the class broken_types\.NotA"):
        get_benchmark_class("wrong_type")
    with pytest.raises(plugins.PluginError, match=r"'misnamed'.*declares name = 'other'; it must equal 'misnamed'"):
        get_benchmark_class("misnamed")
    with pytest.raises(plugins.PluginError, match=r"'ghost_engine'.*from broken-plugins 0\.1: cannot be imported: "):
        engine_class("ghost_engine")
    assert engine_names()[: len(ENGINES)] == tuple(ENGINES)


def test_a_name_two_packages_declare_or_a_name_a_run_cannot_carry_is_left_out(
    installed: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for dist, eps in (("twin", {"sums": "toy_sums:Sums"}), ("dotted", {"my.bench": "toy_sums:Sums"})):
        for path, text in _dist_files(dist, {}, {"rig.benchmarks": eps}).items():
            (installed / path).parent.mkdir(parents=True, exist_ok=True)
            (installed / path).write_text(text)
    plugins.discover.cache_clear()
    with caplog.at_level(logging.WARNING):
        names = benchmark_names()
    assert "sums" not in names and "my.bench" not in names
    assert "toy-sums 0.1 and twin 0.1 both declare 'sums'" in caplog.text
    assert "'my.bench' (toy_sums:Sums) from dotted 0.1 ignored: a name is a letter" in caplog.text


def test_doctor_lists_plugins(installed: Path) -> None:
    from rig.doctor import _plugin_rows

    rows = _plugin_rows()
    ok = {name: detail for name, status, detail in rows if status == "ok"}
    failed = {name: detail for name, status, detail in rows if status == "fail"}
    warned = [detail for _name, status, detail in rows if status == "warn"]
    assert ok == {
        "plugin sum_engine": "toy_sums:SumEngine from toy-sums 0.1",
        "plugin sums": "toy_sums:Sums from toy-sums 0.1",
    }
    assert set(failed) == {"plugin ghost_engine", "plugin crashes", "plugin wrong_type", "plugin misnamed"}
    assert all("from broken-plugins 0.1" in detail for detail in failed.values())
    assert any("'llamacpp'" in d and "is rig's own" in d for d in warned)
    assert any("'callnavi'" in d and "is rig's own" in d for d in warned)


def test_a_run_of_every_benchmark_skips_the_broken_plugins_and_runs_the_rest(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rig bench` without --benchmark (rig's own narrowed to CallNavi to keep it short): CallNavi and the plugin's
    benchmark run on the plugin's engine; the broken ones are skipped, each named."""
    from rig.execution.bench import BenchOptions, run_bench
    from rig.runfolder.folder import RunFolder

    monkeypatch.setattr(plugins, "BENCHMARKS", {"callnavi": BENCHMARKS["callnavi"]})
    plugins.discover.cache_clear()
    (installed / "models.yaml").write_text(MODELS)
    said: list[str] = []
    run = run_bench(
        BenchOptions(model="toy", models_file=installed / "models.yaml", out=installed / "runs", limit=2),
        on_event=said.append,
    )
    folder = RunFolder(run)
    assert [b.name for b in folder.manifest.config.benchmarks] == ["callnavi", "sums"]
    infos = folder.manifest.config.benchmarks
    assert infos[1].episodes == 2 and folder.count() == sum(b.episodes for b in infos)
    skipped = "\n".join(line for line in said if line.startswith("skipped "))
    for name in ("crashes", "wrong_type", "misnamed"):
        assert f"benchmark plugin '{name}'" in skipped and "from broken-plugins 0.1" in skipped


def test_rig_bench_runs_a_plugin_installed_into_a_fresh_environment(tmp_path: Path) -> None:
    """Two wheels pip-installed into a new virtual environment (rig and its dependencies seen through the system
    site-packages): `rig bench` runs the toy package's benchmark on its engine end to end, and the broken package
    is named without stopping rig's own benchmark."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    wheels = [
        write_wheel(tmp_path, "toy_sums", {"toy_sums.py": TOY}, TOY_ENTRY_POINTS),
        write_wheel(tmp_path, "broken_plugins", BROKEN, BROKEN_ENTRY_POINTS),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "PIP_DISABLE_PIP_VERSION_CHECK": "1", "COLUMNS": "120"}
    pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", *map(str, wheels)]
    subprocess.run(pip, check=True, env=env, capture_output=True, timeout=120)
    site = subprocess.run(
        [str(python), "-c", "import toy_sums, sys; print(toy_sums.__file__)"], env=env, capture_output=True, text=True
    )
    assert site.returncode == 0 and str(env_dir) in site.stdout  # installed into the new environment, not rig's
    (tmp_path / "models.yaml").write_text(MODELS)

    def rig(*args: str) -> subprocess.CompletedProcess[str]:
        base = ["--models", str(tmp_path / "models.yaml"), "--model", "toy", "--out", str(tmp_path / "runs")]
        cmd = [str(python), "-m", "rig.cli", "bench", *base, *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)

    r = rig("--benchmark", "sums")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sums" in r.stdout and "exact sum" in r.stdout and "0.50 [" in r.stdout, r.stdout  # 2 of 4 sums right
    assert "benchmark plugin 'callnavi' (broken_types:NotABenchmark) from broken_plugins 0.1 ignored" in r.stderr
    r = rig("--benchmark", "callnavi", "--limit", "1")  # rig's own benchmark, on the plugin's engine
    assert r.returncode == 0 and "callnavi" in r.stdout, r.stdout + r.stderr
    r = rig("--benchmark", "crashes")
    assert r.returncode == 2
    assert (
        "benchmark plugin 'crashes' (broken_imports:Bench) from broken_plugins 0.1: cannot be imported: "
        "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'"
    ) in r.stderr


# Neighbours: distributions that have nothing to do with rig, with metadata importlib.metadata cannot parse.
NEIGHBOURS = {
    "latin1-0.1.dist-info/entry_points.txt": "[console_scripts]\ncafé = cafe:main\n".encode("latin-1"),
    "noeq-0.1.dist-info/entry_points.txt": b"[console_scripts]\nnot an entry point\n",
    "badrig-0.1.dist-info/entry_points.txt": b"[rig.benchmarks]\nbench_without_target\n",
}


def _neighbours(site: Path) -> None:
    for path, data in NEIGHBOURS.items():
        name = path.split("-")[0]
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)
        (site / path).with_name("METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")


def test_a_neighbours_damaged_metadata_never_stops_rig(installed: Path, caplog: pytest.LogCaptureFixture) -> None:
    _neighbours(installed)
    plugins.discover.cache_clear()
    with caplog.at_level(logging.WARNING):
        names = benchmark_names()
    assert "sums" in names and "sum_engine" in engine_names() and set(BENCHMARKS) <= set(names)
    # a malformed line in rig's own group is named with its distribution; the others' groups are never read
    said = caplog.text
    assert "benchmark entry 'bench_without_target' from badrig 0.1 ignored: not 'name = module:attribute'" in said
    assert "latin1" not in caplog.text and "noeq" not in caplog.text
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(REPO)])}
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)  # as a user's shell has it
    r = subprocess.run([sys.executable, "-m", "rig.cli", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "benchmarks"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "sums" in r.stdout, r.stdout + r.stderr


EXITS = {
    "exits_on_import.py": "import sys\nsys.exit(0)\n",
    "raises_on_load.py": (
        "from rig.engines.base import Capabilities, Engine\n\n"
        "class Boom(Engine):\n    name = 'boom'\n\n"
        "    @property\n    def capabilities(self):\n        return Capabilities()\n\n"
        "    async def load(self):\n        raise RuntimeError('no device for boom')\n"
    ),
}
EXITS_ENTRY_POINTS = {"rig.engines": {"boom": "raises_on_load:Boom"}, "rig.benchmarks": {"quits": "exits_on_import:B"}}


@pytest.fixture
def exiting(installed: Path) -> Iterator[Path]:
    for path, text in _dist_files("exits", EXITS, EXITS_ENTRY_POINTS).items():
        (installed / path).parent.mkdir(parents=True, exist_ok=True)
        (installed / path).write_text(text)
    plugins.discover.cache_clear()
    yield installed
    for module in ("exits_on_import", "raises_on_load"):
        sys.modules.pop(module, None)


def test_a_plugin_that_exits_on_import_is_named_and_skipped(
    exiting: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from rig.execution.bench import BenchOptions, run_bench
    from rig.runfolder.folder import RunFolder

    with pytest.raises(plugins.PluginError, match=r"'quits' \(exits_on_import:B\) from exits 0\.1: cannot be imported"):
        get_benchmark_class("quits")
    # a run of every benchmark still runs rig's own (narrowed to CallNavi) and the working plugin's
    monkeypatch.setattr(plugins, "BENCHMARKS", {"callnavi": BENCHMARKS["callnavi"]})
    plugins.discover.cache_clear()
    (exiting / "models.yaml").write_text(MODELS)
    said: list[str] = []
    run = run_bench(
        BenchOptions(model="toy", models_file=exiting / "models.yaml", out=exiting / "runs", limit=1),
        on_event=said.append,
    )
    assert [b.name for b in RunFolder(run).manifest.config.benchmarks] == ["callnavi", "sums"]
    assert any("benchmark plugin 'quits'" in line and "SystemExit" in line for line in said if "skipped" in line)


def test_an_engine_plugin_whose_load_raises_is_named_exit_2(exiting: Path) -> None:
    (exiting / "models.yaml").write_text(MODELS.replace("toy:", "boomy:").replace("sum_engine", "boom"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(exiting), str(REPO)])}
    cmd = [sys.executable, "-m", "rig.cli", "bench", "--models", str(exiting / "models.yaml"), "--model", "boomy"]
    cmd += ["--benchmark", "callnavi", "--limit", "1", "--out", str(exiting / "runs"), "--no-report"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=exiting)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "engine plugin 'boom' (raises_on_load:Boom) from exits 0.1: RuntimeError: no device for boom" in r.stderr


@pytest.mark.parametrize("group", plugins.GROUPS)
def test_rig_s_own_are_lazy_entries_loaded_and_checked_as_a_plugin_is(group: str) -> None:
    """rig's own engines, benchmarks and scorers are entries of the one registry in a plugin's shape
    ("module:attribute"), listed first in its table, and each loads through the same `load` and its checks (its
    group's class, the entry's name); an engine names the backend module it needs and the extra that brings it; a
    scorer lives in its benchmark's folder and scores a benchmark of rig's own."""
    own = plugins.own(group)
    assert own and list(plugins.table(group))[: len(own)] == list(own)
    for name, entry in own.items():
        assert entry.builtin and entry.name == name and entry.group == group and entry.requirement is None
        assert plugins.installed(group, name) is None  # rig's own: nothing for a bundle to pin
        module, _, attr = entry.target.partition(":")
        folder = "rig.engines" if group == plugins.ENGINE_GROUP else "rig.benchmarks"
        assert module.startswith(f"{folder}.") and attr
        assert (entry.needs is not None) == (group == plugins.ENGINE_GROUP) == (entry.extra is not None)
        if entry.needs is None or importlib.util.find_spec(entry.needs) is not None:
            assert plugins.load(entry).name == name
        if group == plugins.SCORER_GROUP:
            assert module.startswith(f"rig.benchmarks.{plugins.load(entry).benchmark}.")
            assert plugins.load(entry).benchmark in plugins.BENCHMARKS


def test_one_of_rig_s_own_that_is_not_its_kind_is_refused_by_the_plugin_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A built-in entry gets the checks a plugin gets: a class that is no benchmark, or one under another name, is a
    `PluginError` naming the entry (from rig), not a class that fails later."""
    wrong = plugins.Plugin(plugins.BENCHMARK_GROUP, "wrong", "rig.engines.llamacpp:LlamaCppEngine", "rig", builtin=True)
    renamed = plugins.Plugin(plugins.BENCHMARK_GROUP, "renamed", BENCHMARKS["callnavi"].target, "rig", builtin=True)
    monkeypatch.setitem(plugins.BENCHMARKS, "wrong", wrong)
    monkeypatch.setitem(plugins.BENCHMARKS, "renamed", renamed)
    with pytest.raises(
        plugins.PluginError, match=r"benchmark 'wrong' \(rig\.engines\.llamacpp:LlamaCppEngine\) from rig: is"
    ):
        get_benchmark_class("wrong")
    with pytest.raises(plugins.PluginError, match=r"benchmark 'renamed' .* declares name = 'callnavi'"):
        get_benchmark_class("renamed")


def test_registering_an_entry_is_enough_for_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """One table: an entry added to the registry is what models.yaml validation, `engine_class`, the benchmark
    lookups, `rig doctor`'s engine rows and `rig benchmarks` read, with no second list to edit."""
    from typer.testing import CliRunner

    from rig.cli import app
    from rig.doctor import engine_rows
    from rig.registry import engine_names as registry_engines

    sums = plugins.Plugin(plugins.BENCHMARK_GROUP, "ownsums", f"{__name__}:OwnSums", "rig", builtin=True)
    eng = plugins.Plugin(plugins.ENGINE_GROUP, "owneng", "rig.engines.ollama:OllamaEngine", "rig", builtin=True)
    monkeypatch.setitem(plugins.BENCHMARKS, "ownsums", sums)
    monkeypatch.setitem(
        plugins.ENGINES, "owneng", plugins.Plugin(**{**eng.__dict__, "needs": "no_such_backend", "extra": "x"})
    )
    assert "owneng" in registry_engines() and "owneng" in engine_names()
    with pytest.raises(
        plugins.MissingExtra, match=r"engine 'owneng' needs the Python module 'no_such_backend'.*rig\[x\]"
    ):
        engine_class("owneng")
    assert "ownsums" in benchmark_names() and get_benchmark_class("ownsums") is OwnSums
    rows = {name: (status, detail) for name, status, detail in engine_rows()}
    assert rows["engine owneng"] == ("warn", "not installed: pip install 'rig[x]'")
    out = CliRunner().invoke(app, ["benchmarks", "ownsums"])
    assert out.exit_code == 0 and "## ownsums" in out.output, out.output


def test_reading_the_table_imports_no_engine_or_benchmark() -> None:
    """The registry is metadata: listing every name (and models.yaml's engine check) imports none of the modules
    its entries point at, nor the bases they are checked against."""
    code = (
        "import sys\n"
        "from rig import plugins\n"
        "from rig.benchmarks import benchmark_names\n"
        "from rig.engines import engine_names\n"
        "from rig.registry import engine_names as accepted\n"
        "assert engine_names() and benchmark_names() and accepted()\n"
        "targets = [e.target.partition(':')[0] for g in plugins.GROUPS for e in plugins.table(g).values()]\n"
        "bases = [b.partition(':')[0] for b in plugins.BASES.values()]\n"
        "print([m for m in targets + bases if m in sys.modules])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
