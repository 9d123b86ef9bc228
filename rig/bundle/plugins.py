"""Plugins a bundle carries: a chosen benchmark, or a chosen model's engine, that an installed package provides
through an entry point (`rig.plugins`) travels as that package's wheel. Its distribution is pinned (``name==version``,
the version installed here) among the bundle's requirements, so that `collect_wheels` fetches its wheel with rig's
and `rig bundle install` installs it beside rig. A lab's plugin is seldom on an index: offline (``--no-index``) its
wheel must be in a ``--find-links`` folder, and a plugin without one is refused before anything is copied, naming
the distribution and how to supply it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rig.bundle.manifest import BundleError, CreateOptions

HOW = "build its wheel (`pip wheel --no-deps -w DIR <the package's folder>`) and pass --find-links DIR"


@dataclass(frozen=True)
class PluginDist:
    """A distribution the bundle must carry, and what of the bundle needs it (in words)."""

    requirement: str  # name==version
    needed_by: str

    @property
    def name(self) -> str:
        return self.requirement.partition("==")[0]

    @property
    def version(self) -> str:
        return self.requirement.partition("==")[2]


def plugin_dists(benchmarks: list[str], specs: list[Any]) -> list[PluginDist]:
    """The plugin distributions of the chosen benchmarks and of the chosen models' engines, each once (rig's own
    need none). A plugin whose entry point belongs to no known distribution cannot be pinned: refused."""
    from rig import plugins

    wanted = [(plugins.installed(plugins.BENCHMARK_GROUP, name), f"benchmark {name!r}") for name in benchmarks]
    wanted += [
        (plugins.installed(plugins.ENGINE_GROUP, s.engine), f"engine {s.engine!r} of model {s.name!r}") for s in specs
    ]
    out: dict[str, PluginDist] = {}
    for plugin, what in wanted:
        if plugin is None:
            continue
        if plugin.requirement is None:
            raise BundleError(f"{what} is the {plugin}: no distribution declares it, so no wheel can carry it")
        if plugin.requirement not in out:
            out[plugin.requirement] = PluginDist(plugin.requirement, f"{what} ({plugin})")
    return list(out.values())


def _wheel_name(name: str) -> str:
    """A distribution's name as a wheel's file name spells it."""
    return re.sub(r"[-_.]+", "_", name).lower()


def local_wheel(dist: PluginDist, folders: list[Path]) -> Path | None:
    """The distribution's wheel (its name and version, any tag) in one of ``folders``, else None."""
    for folder in folders:
        for wheel in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
            name, _, rest = wheel.name.partition("-")
            if _wheel_name(name) == _wheel_name(dist.name) and rest.partition("-")[0] == dist.version:
                return wheel
    return None


def check_plugin_wheels(opts: CreateOptions, dists: list[PluginDist]) -> None:
    """Before any copying: with no index, every plugin distribution's wheel is in a --find-links folder."""
    if not opts.wheels or not opts.no_index:
        return
    where = ", ".join(map(str, opts.find_links)) or "none given"
    for dist in dists:
        if local_wheel(dist, opts.find_links) is None:
            raise BundleError(
                f"{dist.needed_by}: the bundle must carry {dist.name} {dist.version}, and no wheel of it is in "
                f"--find-links ({where}); {HOW}"
            )
