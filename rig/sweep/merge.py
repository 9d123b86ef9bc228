"""`rig merge`: join the shards of one cell into one run folder, as if one process had run every episode.

The merged manifest is the shards' common configuration with `shard` cleared and the episode counts summed, so its
config hash is the hash an unsharded run of the same episodes has; results are copied row by row through the store,
which refuses an (episode, repeat) stored twice.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from rig.execution.bench import BenchError
from rig.names import printable
from rig.records import EpisodeResult
from rig.runfolder.config import RunConfig
from rig.runfolder.folder import RunFolder
from rig.runfolder.manifest import RunManifest, new_run_id
from rig.runfolder.spec import parse_shard
from rig.runfolder.store import Store
from rig.runformat import RunFileError


def merge_runs(shard_dirs: list[Path], out: Path) -> Path:
    """Write one run folder under `out` from the run folders of shards 0..N-1 of one run; return it."""
    if not shard_dirs:
        raise BenchError("rig merge: no run folders given")
    try:
        folders = [RunFolder(d) for d in shard_dirs]
    except RunFileError as e:  # no manifest, or a damaged one: named
        raise BenchError(f"rig merge: {e}") from None
    mans = [f.manifest for f in folders]
    loose = [str(d) for d, m in zip(shard_dirs, mans, strict=True) if m.config.shard is None]
    if loose:
        raise BenchError(f"rig merge: {', '.join(loose)}: not a shard (its manifest has no shard)")
    shards = [m.config.shard or "" for m in mans]
    parsed = sorted(parse_shard(s) for s in shards)  # valid: the manifest's own check
    n = parsed[0][1]
    if parsed != [(i, n) for i in range(n)]:
        raise BenchError(f"rig merge: expected shards 0..{n - 1} of {n} once each, got {', '.join(sorted(shards))}")
    unfinished = [str(d) for d, m in zip(shard_dirs, mans, strict=True) if m.status != "finished"]
    if unfinished:
        raise BenchError("rig merge: shard run(s) not finished (resume them first): " + ", ".join(unfinished))
    first = mans[0]

    def common(m: RunManifest) -> dict:
        return m.config.model_dump(mode="json", exclude={"shard", "benchmarks"}) | {
            "benchmarks": [b.model_dump(mode="json", exclude={"episodes"}) for b in m.config.benchmarks]
        }

    for d, m in zip(shard_dirs, mans, strict=True):
        if common(m) != common(first):
            raise BenchError(f"rig merge: {d} was run with another configuration than {shard_dirs[0]}")
    try:  # read before the merged folder exists, so a damaged shard leaves nothing behind
        per_shard = [(d, f.results()) for d, f in zip(shard_dirs, folders, strict=True)]
    except RunFileError as e:
        raise BenchError(f"rig merge: {e}") from None
    seen: dict[tuple[str, str, int], Path] = {}
    for d, rs in per_shard:  # shards that overlap (one run's shard given twice under two folders, a copied result)
        for r in rs:
            key = (r.benchmark, r.episode_id, r.repeat)
            if key in seen:
                raise BenchError(
                    f"rig merge: {printable(r.benchmark)}/{printable(r.episode_id)} repeat {r.repeat} is stored in "
                    f"both {seen[key]} and {d}: the shards overlap, so they are not shards of one run"
                )
            seen[key] = d
    results = [r for _, rs in per_shard for r in rs]
    cfg = first.config.model_copy(deep=True)
    cfg.shard = None
    for i, b in enumerate(cfg.benchmarks):
        b.episodes = sum(m.config.benchmarks[i].episodes for m in mans)
    run_id = new_run_id(cfg.model.name, "+".join(b.name for b in cfg.benchmarks))
    run_dir = out / run_id
    # Built in a folder of this call's own and renamed to the run id when whole: a stop or an error mid-merge leaves
    # no half-merged run (one marked running that no --resume would finish); the final name is taken atomically.
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = out / f".{run_id}.{os.getpid()}-{uuid.uuid4().hex[:8]}.merging"
        staging.mkdir()
    except OSError as e:
        raise BenchError(f"rig merge: --out {out}: cannot create the merged run folder ({e.strerror})") from None
    try:
        _write_merged(staging, results, first, mans, cfg, run_id)
        os.rename(staging, run_dir)  # refuses a run_dir that exists and is not empty
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return run_dir


def _write_merged(
    run_dir: Path,
    results: list[EpisodeResult],
    first: RunManifest,
    mans: list[RunManifest],
    cfg: RunConfig,
    run_id: str,
) -> None:
    loads = [m.load_time_s for m in mans if m.load_time_s is not None]
    rss = [m.peak_rss_bytes for m in mans if m.peak_rss_bytes]
    gpus = [m.gpu_memory for m in mans if m.gpu_memory is not None and m.gpu_memory.available]
    manifest = first.model_copy(
        deep=True,
        update=dict(
            run_id=run_id,
            config=cfg,
            config_hash=cfg.digest(),
            spec=first.spec.model_copy(update={"shard": None}) if first.spec is not None else None,
            started_at=min(m.started_at for m in mans),
            # each shard loaded the model once in its own process; a single run would have loaded it once too
            load_time_s=max(loads) if loads else None,
            peak_rss_bytes=max(rss) if rss else None,
            gpu_memory=max(gpus, key=lambda g: g.peak_bytes or 0) if gpus else first.gpu_memory,
            engine_info=first.engine_info | {"merged_from": [m.run_id for m in mans]},
        ),
    )
    # The manifest last: a merge killed outright leaves a folder with no manifest, which `rig runs` does not list.
    store = Store(run_dir / "results.sqlite")
    try:
        for r in results:
            store.write(r)
    finally:
        store.close()
    manifest.status = "finished"
    manifest.finished_at = max((m.finished_at or time.time()) for m in mans)
    manifest.write(run_dir)
