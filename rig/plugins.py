"""The one registry of everything pluggable: engines, benchmarks and scorers, rig's own and those of installed packages.

rig's own are declared here as lazy "module:attribute" entries, the shape of an entry point, and loaded exactly as a
plugin is (imported only when a run asks, checked to be the kind's class under its entry's name). A lab's package
declares its own in its pyproject.toml::

    [project.entry-points."rig.benchmarks"]
    mybench = "mylab.bench:MyBench"

and, once installed beside rig, `rig bench --benchmark mybench` runs it: nothing in rig is edited (a ``rig.scorers``
entry, a `rig.benchmarks.predictions.Scorer`, makes `rig rescore mybench FILES` read its harness's prediction files).
Discovery reads only the packages' metadata (no plugin is imported until a run asks for it), once per process, and only
rig's three groups of it: another package's damaged metadata (an entry_points.txt that is not UTF-8, a line without `=`)
is passed over, never raised, so it cannot stop `rig --help`; a malformed line in rig's groups is a warning naming its
distribution. A plugin that cannot be used never stops rig's own entries: a name that clashes with a built-in (the
built-in wins), a name two distributions declare, or a name a run folder or `-O name.key` could not carry is left out
with a warning naming its distribution; one that fails to import (whatever it raises, `SystemExit` included), or is not
the class it should be, is a `PluginError` naming it when it is asked for, and skipped with a warning in a run of every
benchmark; an engine plugin whose construction or `load` raises is a `PluginError` too (`rig.execution.turn`), and so is
a scorer plugin that raises (`rig.execution.rescore`). Only the standard library is imported here: engines, benchmarks,
models.yaml validation, `rig doctor`, bundles and every command read this one table (`table`, `names`, `load`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

ENGINE_GROUP = "rig.engines"
BENCHMARK_GROUP = "rig.benchmarks"
SCORER_GROUP = "rig.scorers"  # readers of prediction files made outside rig (`rig rescore`)
GROUPS = (ENGINE_GROUP, BENCHMARK_GROUP, SCORER_GROUP)
# A plugin's name becomes part of run ids, folder names and `-O name.key`: letters, digits, _ and -.
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

log = logging.getLogger(__name__)


def _kind(group: str) -> str:
    return {ENGINE_GROUP: "engine", BENCHMARK_GROUP: "benchmark", SCORER_GROUP: "scorer"}[group]


class PluginError(ImportError):
    """A plugin that cannot be used; str() names the plugin, its distribution and why."""


class MissingExtra(ImportError):
    """One of rig's own entries whose backend module is not installed; str() names the pip extra that brings it."""


@dataclass(frozen=True)
class Plugin:
    """One entry, rig's own or an installed package's entry point: the name it registers, the object it points at
    ("module:attribute", imported only by `load`) and the distribution declaring it."""

    group: str
    name: str
    target: str  # "module:attribute", as declared
    dist: str  # "name version"
    # the declaring distribution's name and version (None: an entry point of no known distribution): what a bundle
    # pins to carry the plugin
    requirement: str | None = None
    builtin: bool = False  # rig's own: never pinned by a bundle, its errors rig's own (not a PluginError)
    # rig's own only: the backend module that must be importable (looked up, never imported: importing vLLM
    # initialises CUDA, after which --gpu could no longer choose the device) and the pip extra that brings it
    needs: str | None = None
    extra: str | None = None

    def __str__(self) -> str:
        return f"{_kind(self.group)} {'' if self.builtin else 'plugin '}{self.name!r} ({self.target}) from {self.dist}"


def _own(group: str, name: str, target: str, needs: str | None = None, extra: str | None = None) -> Plugin:
    return Plugin(group, name, target, "rig", builtin=True, needs=needs, extra=extra)


# rig's own, in the order commands list them: a new engine or benchmark is its module plus one line here.
ENGINES: dict[str, Plugin] = {
    p.name: p
    for p in (
        _own(ENGINE_GROUP, "llamacpp", "rig.engines.llamacpp:LlamaCppEngine", "llama_cpp", "llamacpp"),
        _own(ENGINE_GROUP, "openai_compat", "rig.engines.openai_compat:OpenAICompatEngine", "httpx", "openai"),
        _own(ENGINE_GROUP, "ollama", "rig.engines.ollama:OllamaEngine", "httpx", "ollama"),
        _own(ENGINE_GROUP, "vllm", "rig.engines.vllm:VllmEngine", "vllm", "vllm"),
    )
}
BENCHMARKS: dict[str, Plugin] = {
    p.name: p
    for p in (
        _own(BENCHMARK_GROUP, "callnavi", "rig.benchmarks.callnavi.benchmark:CallNavi"),
        _own(BENCHMARK_GROUP, "evgeoqa", "rig.benchmarks.evgeoqa.benchmark:EVGeoQA"),
        _own(BENCHMARK_GROUP, "mobilitybench", "rig.benchmarks.mobilitybench.benchmark:MobilityBench"),
        _own(BENCHMARK_GROUP, "routeeval", "rig.benchmarks.routeeval.benchmark:RouteEval"),
        _own(BENCHMARK_GROUP, "urbangeo", "rig.benchmarks.urbangeo.benchmark:UrbanGeoEval"),
    )
}
# rig's own scorers of prediction files, each named after the benchmark whose data and metrics it scores with.
SCORERS: dict[str, Plugin] = {
    p.name: p
    for p in (
        _own(SCORER_GROUP, "callnavi", "rig.benchmarks.callnavi.rescore:CallNaviScorer"),
        _own(SCORER_GROUP, "mobilitybench", "rig.benchmarks.mobilitybench.rescore:MobilityBenchScorer"),
    )
}
# The class each group's entries must be (imported only when one is loaded).
BASES = {
    ENGINE_GROUP: "rig.engines.base:Engine",
    BENCHMARK_GROUP: "rig.benchmarks.base:Benchmark",
    SCORER_GROUP: "rig.benchmarks.predictions:Scorer",
}


@dataclass(frozen=True)
class Found:
    """What discovery found in one group: the usable plugins by name, and the ones left out with why."""

    plugins: dict[str, Plugin]
    problems: list[str]


# An entry point's value as importlib.metadata reads it: module, optional :attribute, optional [extras] (ignored).
_TARGET = re.compile(r"(?P<module>[\w.]+)\s*(?::\s*(?P<attr>[\w.]+)\s*)?(?:\[.*\]\s*)?")


def _rig_lines(text: str) -> Iterator[tuple[str, str]]:
    """(group, line) for each entry of rig's groups in an entry_points.txt; other groups are never parsed, so a
    neighbour's malformed line there cannot stop rig."""
    group = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
        elif group in GROUPS:
            yield group, line


def _declared(group: str) -> tuple[dict[str, list[Plugin]], list[str]]:
    """Every entry of ``group`` by name, read from each installed distribution's metadata once (the first of a name
    on the path wins, as for imports), and the malformed ones of ``group`` named. Only rig's groups are read: a
    distribution whose metadata cannot be read at all (not UTF-8, missing) is passed over."""
    by_name: dict[str, list[Plugin]] = {}
    problems: list[str] = []
    seen: set[str] = set()
    for dist in importlib.metadata.distributions():
        try:
            name, version = dist.metadata["Name"], dist.version
            text = dist.read_text("entry_points.txt")
        except Exception as e:  # whatever a damaged neighbour raises; ours cannot be told from it
            log.debug("distribution metadata not readable: %s: %s", type(e).__name__, e)
            continue
        key = re.sub(r"[-_.]+", "-", str(name)).lower()
        if key in seen:  # a later copy of a distribution on the path, which imports would not reach
            continue
        seen.add(key)
        if not text:
            continue
        dist_name = f"{name} {version}"
        for g, line in _rig_lines(text):
            if g != group:
                continue
            entry, eq, target = (part.strip() for part in line.partition("="))
            found = _TARGET.fullmatch(target)
            if not eq or not entry or found is None:
                problems.append(f"{_kind(g)} entry {line!r} from {dist_name} ignored: not 'name = module:attribute'")
                continue
            target = found["module"] + (f":{found['attr']}" if found["attr"] else "")
            plugin = Plugin(group, entry, target, dist_name, f"{name}=={version}")
            by_name.setdefault(entry, []).append(plugin)
    return by_name, problems


@functools.cache
def discover(group: str, builtin: tuple[str, ...]) -> Found:
    """The plugins of ``group`` whose names are free (not in ``builtin``, declared once, well formed); each one
    left out is a warning, logged once per process."""
    by_name, problems = _declared(group)
    plugins = {}
    for name, found in sorted(by_name.items()):
        if name in builtin:
            problems += [f"{p} ignored: {name!r} is rig's own" for p in found]
        elif len(found) > 1:
            dists = " and ".join(sorted(q.dist for q in found))
            problems += [f"{p} ignored: {dists} both declare {name!r}" for p in found]
        elif not NAME.fullmatch(name):
            problems.append(f"{found[0]} ignored: a name is a letter, then letters, digits, '_' or '-' (at most 64)")
        else:
            plugins[name] = found[0]
    for problem in problems:
        log.warning("warning: %s", problem)
    return Found(plugins, problems)


def own(group: str) -> dict[str, Plugin]:
    """rig's own entries of ``group`` (read when called, so a test may register one)."""
    return {ENGINE_GROUP: ENGINES, BENCHMARK_GROUP: BENCHMARKS, SCORER_GROUP: SCORERS}[group]


def table(group: str) -> dict[str, Plugin]:
    """Everything ``group`` offers, by name: rig's own in their order, then installed packages' whose names are free.
    Metadata only: nothing is imported."""
    builtin = own(group)
    return {**builtin, **discover(group, tuple(builtin)).plugins}


def names(group: str) -> tuple[str, ...]:
    """The names ``table`` holds, in its order."""
    return tuple(table(group))


def installed(group: str, name: str) -> Plugin | None:
    """The installed package's entry of that name; None for rig's own or an unknown name (its errors are not a
    plugin's to be named for)."""
    entry = table(group).get(name)
    return None if entry is None or entry.builtin else entry


def _attribute(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


def load(plugin: Plugin, name_attr: str = "name") -> Any:
    """The class ``plugin`` points at, imported and checked to be its group's class under its entry's name. rig's own
    whose backend is not installed is `MissingExtra`; a plugin that does not import, and any entry that is not a
    subclass of its group's class or declares another ``name``, is a `PluginError` naming it and its distribution."""
    if plugin.needs is not None and importlib.util.find_spec(plugin.needs) is None:
        raise MissingExtra(
            f"{_kind(plugin.group)} {plugin.name!r} needs the Python module {plugin.needs!r}, which is not installed. "
            f"Install it with: pip install 'rig[{plugin.extra}]'"
        )
    try:
        obj = _attribute(plugin.target)
    except (Exception, SystemExit) as e:  # a plugin's own bug, even sys.exit() on import, is its problem, named
        if plugin.builtin:
            raise
        raise PluginError(f"{plugin}: cannot be imported: {type(e).__name__}: {e}") from e
    base = _attribute(BASES[plugin.group])
    if not (isinstance(obj, type) and issubclass(obj, base)):
        what = f"the class {obj.__module__}.{obj.__qualname__}" if isinstance(obj, type) else f"{type(obj).__name__}"
        raise PluginError(f"{plugin}: is {what}, not a subclass of {base.__module__}.{base.__qualname__}")
    declared = getattr(obj, name_attr, None)
    if declared != plugin.name:
        raise PluginError(f"{plugin}: its class declares {name_attr} = {declared!r}; it must equal {plugin.name!r}")
    return obj


def listing(group: str) -> list[tuple[str, str, str]]:
    """`rig doctor`'s rows for the installed packages' entries of one group: each plugin imported and checked (ok,
    or fail with why), and each one left out (warn)."""
    found = discover(group, tuple(own(group)))
    rows = []
    for name, plugin in found.plugins.items():
        try:
            load(plugin)
            rows.append((f"plugin {name}", "ok", f"{plugin.target} from {plugin.dist}"))
        except PluginError as e:
            rows.append((f"plugin {name}", "fail", str(e)))
    rows += [("plugin", "warn", problem) for problem in found.problems]
    return rows
