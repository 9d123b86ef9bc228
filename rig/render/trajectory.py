"""`rig trajectory`: one EVGeoQA episode of a run drawn as its GeoRover trajectory (the paper's Figure 5).

The drawing is the benchmark's (`rig.benchmarks.evgeoqa.plot`, over one result and its query); reading the run is
here, above the benchmarks: the stored result and the episode's query rebuilt from the benchmark's recorded data
path and options, both through `RunFolder` (so a damaged or newer manifest is refused naming the file)."""

from __future__ import annotations

from pathlib import Path

from rig.benchmarks.evgeoqa.data import Query, Setting
from rig.records import EpisodeResult, write_atomic
from rig.runfolder.folder import RunFolder
from rig.runfolder.summary import benchmark_of


class TrajectoryError(ValueError):
    """Nothing to draw (no EVGeoQA result, an unknown episode, data no longer readable); str() says which."""


def pick_result(folder: RunFolder, episode: str | None, repeat: int) -> EpisodeResult:
    """The result to draw: ``episode`` at ``repeat``, or else the first one whose agent moved (else the first)."""
    results = [r for r in folder.results("evgeoqa") if r.repeat == repeat]
    if episode:
        results = [r for r in results if r.episode_id == episode]
    if not results:
        what = f"episode {episode!r}" if episode else "EVGeoQA result"
        raise TrajectoryError(f"{folder.path}: no {what} at repeat {repeat} to draw")
    return next((r for r in results if (r.output or {}).get("trace", {}).get("moves")), results[0])


def episode_truth(folder: RunFolder, episode_id: str) -> tuple[Query, Setting]:
    """The query and radii of an episode, rebuilt from the run's recorded benchmark data and options."""
    info = folder.benchmark("evgeoqa")
    bench = benchmark_of(info)(Path(info.data_path), info.options)
    ep = next((e for e in bench.episodes() if e.id == episode_id), None)
    if ep is None:
        raise TrajectoryError(f"{info.data_path}: episode {episode_id!r} is no longer in the run's data")
    return Query.model_validate(ep.ground_truth["query"]), Setting.model_validate(ep.ground_truth["setting"])


def write_trajectory(
    run_dir: Path, out: Path, episode: str | None = None, repeat: int = 0, pack: str | None = None
) -> Path:
    """Draw one episode's trajectory into ``out`` (SVG), with the roads of map ``pack`` behind it when given."""
    from rig.benchmarks.evgeoqa.plot import road_segments, trajectory_svg

    folder = RunFolder(run_dir)
    result = pick_result(folder, episode, repeat)
    query, setting = episode_truth(folder, result.episode_id)
    roads = None
    if pack:
        from rig.maps.locate import resolve_pack_dir
        from rig.maps.query import MapPack

        roads = road_segments(MapPack(resolve_pack_dir(pack)))
    write_atomic(out, trajectory_svg(result, query, setting, roads))
    return out
