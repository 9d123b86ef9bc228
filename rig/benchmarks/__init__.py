"""Benchmarks by name, imported only when asked for, as the one registry (`rig.plugins`) lists them; and what a
report needs from a benchmark without its data: recorded options, tables, headline scores, option help.

`BENCHMARKS` is rig's own (the registry's entries); installed packages add theirs through the `rig.benchmarks` entry
point group. `benchmark_names` is both, and what every command that takes a benchmark name reads."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rig import plugins
from rig.plugins import BENCHMARKS

if TYPE_CHECKING:
    from rig.benchmarks.base import Benchmark, Table
    from rig.records import Episode, EpisodeResult
    from rig.runfolder.config import BenchmarkInfo

# What a command runs when no benchmark is named and it needs one (compare, load, doctor's data check).
DEFAULT_BENCHMARK = "callnavi"


log = logging.getLogger(__name__)


def benchmark_names() -> list[str]:
    """Every benchmark a run may name, rig's own and installed plugins', sorted (the order of a run of all)."""
    return sorted(plugins.names(plugins.BENCHMARK_GROUP))


def get_benchmark_class(name: str) -> type[Benchmark]:
    """The benchmark's class, imported; a plugin that cannot be used is a `plugins.PluginError` naming its
    distribution, an unknown name a KeyError listing the known ones."""
    entry = plugins.table(plugins.BENCHMARK_GROUP).get(name)
    if entry is None:
        raise KeyError(f"unknown benchmark {name!r}; available: {', '.join(benchmark_names())}")
    bench: type[Benchmark] = plugins.load(entry)
    return bench


def benchmark_classes() -> dict[str, type[Benchmark]]:
    """Every benchmark that loads, by name; a plugin that does not is a warning and left out, so a broken package
    never stops rig's own benchmarks."""
    classes = {}
    for name in benchmark_names():
        try:
            classes[name] = get_benchmark_class(name)
        except plugins.PluginError as e:
            log.warning("warning: %s (left out)", e)
    return classes


def flag_option(flag: str, value: Any, benchmark: str | None) -> dict[str, Any]:
    """The option a benchmark's own flag (``--format``, declared in its ``flag_options``) sets, as ``-O`` would:
    ``key`` when that benchmark is named, ``bench.key`` for each benchmark that has it in a run of all of them. A
    named benchmark without the flag is a KeyError saying whose flag it is."""
    if benchmark is not None:
        cls = get_benchmark_class(benchmark)
        if flag in cls.flag_options:
            return {cls.flag_options[flag][0]: value}
        owners = [what for c in benchmark_classes().values() for f, (_k, what) in c.flag_options.items() if f == flag]
        raise KeyError(f"--{flag} is {' / '.join(owners) or 'no benchmark option'}; benchmark {benchmark} has none")
    return {f"{n}.{c.flag_options[flag][0]}": value for n, c in benchmark_classes().items() if flag in c.flag_options}


def recorded_options(info: BenchmarkInfo) -> Any:
    """A run's options as the benchmark's typed model. Manifests record the validated options (defaults included);
    older ones hold the ``-O`` strings as passed, which validate to the same model."""
    return get_benchmark_class(info.name).parse_options(info.options)


def benchmark_tables(info: BenchmarkInfo, results: list[EpisodeResult], label: str = "") -> list[Table]:
    """A recorded benchmark's report tables from its stored results and recorded options: no data is read."""
    return get_benchmark_class(info.name).tables(results, recorded_options(info), label)


def headline(name: str, result: EpisodeResult) -> float | None:
    """The benchmark's one per-episode score (confidence intervals, comparisons)."""
    return get_benchmark_class(name).headline(result)


def rebuilt_episodes(info: BenchmarkInfo) -> tuple[dict[str, Episode], str | None]:
    """Episode id -> episode (its prompt messages, tools and ground truth), rebuilt from the recorded data (results
    do not store prompts: they are large and deterministic) when that data still has the run's hash; else {} and
    why: a prompt rebuilt from other data would show what the run never sent."""
    from pathlib import Path

    try:
        bench = get_benchmark_class(info.name)(Path(info.data_path), info.options)
        episodes = {e.id: e for e in bench.episodes()}
        now = bench.data_hash()  # after episodes(): a benchmark may hash what loading them read
    except Exception:  # data moved since the run: the reports say so rather than fail
        return {}, f"{info.data_path} is no longer readable"
    if now != info.data_hash:
        return {}, f"the data at {info.data_path} changed since the run (data hash {now}, the run's {info.data_hash})"
    return episodes, None


def recorded_episodes(info: BenchmarkInfo) -> dict[str, Episode]:
    """``rebuilt_episodes`` without the reason: {} when the run's data is gone or changed."""
    return rebuilt_episodes(info)[0]


def recorded_prompts(info: BenchmarkInfo) -> tuple[dict[str, str], str | None]:
    """Episode id -> prompt text (the episode's messages joined), rebuilt from the recorded data; ({}, why) without
    it or when it changed (``rebuilt_episodes``)."""
    episodes, why = rebuilt_episodes(info)
    return {i: "\n\n".join(m.content for m in e.messages) for i, e in episodes.items()}, why


def options_markdown(name: str) -> str:
    """The ``-O`` options of one benchmark as a markdown table (README sections, ``rig benchmarks``)."""
    rows = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for key, f in get_benchmark_class(name).Options.model_fields.items():
        default = _default_text(f.get_default(call_default_factory=True))
        rows.append(f"| `{key}` | {_type_text(f.annotation)} | {default} | {f.description or ''} |")
    return "\n".join(rows)


def _type_text(annotation: Any) -> str:
    import typing

    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is typing.Annotated or annotation == list[str]:
        return "list"
    if args and len(args) == 1:
        return _type_text(args[0])
    return getattr(annotation, "__name__", str(annotation))


def _default_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return f"`{','.join(value)}`"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


OPTIONS_BEGIN = "<!-- options: generated from the Options model by `rig benchmarks --write-readmes` -->"
OPTIONS_END = "<!-- /options -->"


def with_options_table(readme: str, name: str) -> str:
    """``readme`` with the text between the options markers replaced by the current table (markers appended at the
    end when absent)."""
    block = f"{OPTIONS_BEGIN}\n{options_markdown(name)}\n{OPTIONS_END}"
    if OPTIONS_BEGIN in readme and OPTIONS_END in readme:
        head, _, rest = readme.partition(OPTIONS_BEGIN)
        return head + block + rest.partition(OPTIONS_END)[2]
    return readme.rstrip("\n") + "\n\n" + block + "\n"


# BENCHMARKS (rig's own entries) is the registry's, re-exported
__all__ = [
    "BENCHMARKS",
    "DEFAULT_BENCHMARK",
    "OPTIONS_BEGIN",
    "OPTIONS_END",
    "benchmark_classes",
    "benchmark_names",
    "benchmark_tables",
    "flag_option",
    "get_benchmark_class",
    "headline",
    "options_markdown",
    "rebuilt_episodes",
    "recorded_episodes",
    "recorded_options",
    "recorded_prompts",
    "with_options_table",
]
