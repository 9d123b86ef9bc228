"""Engines and benchmarks from installed packages: entry points in the groups `rig.engines` and `rig.benchmarks`.

A lab's package declares, in its pyproject.toml::

    [project.entry-points."rig.benchmarks"]
    mybench = "mylab.bench:MyBench"

and, once installed beside rig, `rig bench --benchmark mybench` runs it: nothing in rig is edited. Discovery reads
only the packages' metadata (no plugin is imported until a run asks for it), once per process, and only rig's two
groups of it: another package's damaged metadata (an entry_points.txt that is not UTF-8, a line without `=`) is
passed over, never raised, so it cannot stop `rig --help`; a malformed line in rig's groups is a warning naming its
distribution. A plugin that cannot be used never stops rig's own engines and benchmarks: a name that clashes with a
built-in (the built-in wins), a name two distributions declare, or a name a run folder or `-O name.key` could not
carry is left out with a warning naming its distribution; one that fails to import (whatever it raises, `SystemExit`
included), or is not the class it should be, is a `PluginError` naming it when it is asked for, and skipped with a
warning in a run of every benchmark; an engine plugin whose construction or `load` raises is a `PluginError` too
(`rig.execution.turn`). Only the standard library is imported here: the registries of engines and benchmarks sit on
top of it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

ENGINE_GROUP = "rig.engines"
BENCHMARK_GROUP = "rig.benchmarks"
GROUPS = (ENGINE_GROUP, BENCHMARK_GROUP)
# A plugin's name becomes part of run ids, folder names and `-O name.key`: letters, digits, _ and -.
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

log = logging.getLogger(__name__)


def _kind(group: str) -> str:
    return "engine" if group == ENGINE_GROUP else "benchmark"


class PluginError(ImportError):
    """A plugin that cannot be used; str() names the plugin, its distribution and why."""


@dataclass(frozen=True)
class Plugin:
    """One entry point: the name it registers, the object it points at and the distribution declaring it."""

    group: str
    name: str
    target: str  # "module:attribute", as declared
    dist: str  # "name version"
    # the declaring distribution's name and version (None: an entry point of no known distribution): what a bundle
    # pins to carry the plugin
    requirement: str | None = None

    def __str__(self) -> str:
        return f"{_kind(self.group)} plugin {self.name!r} ({self.target}) from {self.dist}"


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


def load(plugin: Plugin, base: type, name_attr: str = "name") -> Any:
    """The class ``plugin`` points at, imported; a `PluginError` naming plugin and distribution when it does not
    import, is not a subclass of ``base``, or declares another ``name`` than its entry point's."""
    module, _, attr = plugin.target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else []:
            obj = getattr(obj, part)
    except (Exception, SystemExit) as e:  # a plugin's own bug, even sys.exit() on import, is its problem, named
        raise PluginError(f"{plugin}: cannot be imported: {type(e).__name__}: {e}") from e
    if not (isinstance(obj, type) and issubclass(obj, base)):
        what = f"the class {obj.__module__}.{obj.__qualname__}" if isinstance(obj, type) else f"{type(obj).__name__}"
        raise PluginError(f"{plugin}: is {what}, not a subclass of {base.__module__}.{base.__qualname__}")
    declared = getattr(obj, name_attr, None)
    if declared != plugin.name:
        raise PluginError(f"{plugin}: its class declares {name_attr} = {declared!r}; it must equal {plugin.name!r}")
    return obj


def listing(group: str, builtin: Collection[str], base: type) -> list[tuple[str, str, str]]:
    """`rig doctor`'s rows for one group: each plugin imported and checked (ok, or fail with why), and each one
    left out (warn)."""
    found = discover(group, tuple(builtin))
    rows = []
    for name, plugin in found.plugins.items():
        try:
            load(plugin, base)
            rows.append((f"plugin {name}", "ok", f"{plugin.target} from {plugin.dist}"))
        except PluginError as e:
            rows.append((f"plugin {name}", "fail", str(e)))
    rows += [("plugin", "warn", problem) for problem in found.problems]
    return rows
