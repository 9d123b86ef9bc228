"""Engines and benchmarks from installed packages: entry points in the groups `rig.engines` and `rig.benchmarks`.

A lab's package declares, in its pyproject.toml::

    [project.entry-points."rig.benchmarks"]
    mybench = "mylab.bench:MyBench"

and, once installed beside rig, `rig bench --benchmark mybench` runs it: nothing in rig is edited. Discovery reads
only the packages' metadata (no plugin is imported until a run asks for it), once per process. A plugin that cannot
be used never stops rig's own engines and benchmarks: a name that clashes with a built-in (the built-in wins), a name
two distributions declare, or a name a run folder or `-O name.key` could not carry is left out with a warning naming
its distribution; one that fails to import, or is not the class it should be, is a `PluginError` naming it when it
is asked for, and skipped with a warning in a run of every benchmark. Only the standard library is imported here:
the registries of engines and benchmarks sit on top of it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

ENGINE_GROUP = "rig.engines"
BENCHMARK_GROUP = "rig.benchmarks"
# A plugin's name becomes part of run ids, folder names and `-O name.key`: letters, digits, _ and -.
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

log = logging.getLogger(__name__)


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
        kind = "engine" if self.group == ENGINE_GROUP else "benchmark"
        return f"{kind} plugin {self.name!r} ({self.target}) from {self.dist}"


@dataclass(frozen=True)
class Found:
    """What discovery found in one group: the usable plugins by name, and the ones left out with why."""

    plugins: dict[str, Plugin]
    problems: list[str]


def _dist(ep: importlib.metadata.EntryPoint) -> str:
    dist = ep.dist
    return "an unknown distribution" if dist is None else f"{dist.metadata['Name']} {dist.version}"


def _requirement(ep: importlib.metadata.EntryPoint) -> str | None:
    dist = ep.dist
    return None if dist is None else f"{dist.metadata['Name']}=={dist.version}"


@functools.cache
def discover(group: str, builtin: tuple[str, ...]) -> Found:
    """The plugins of ``group`` whose names are free (not in ``builtin``, declared once, well formed); each one
    left out is a warning, logged once per process."""
    by_name: dict[str, list[Plugin]] = {}
    for ep in importlib.metadata.entry_points(group=group):
        by_name.setdefault(ep.name, []).append(Plugin(group, ep.name, ep.value, _dist(ep), _requirement(ep)))
    plugins, problems = {}, []
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
    except Exception as e:  # a plugin's own bug, whatever it raises, is its problem, named as such
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
