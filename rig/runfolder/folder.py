"""One reader of a run folder: its manifest, stored results, GPU samples and `RunSummary`s, read-only.

Every command that reads a run goes through a `RunFolder` (report, HTML, the screen `rig bench` ends with, export and
`rig runs`, compare, load, divergence, the sweep's progress, merge and leaderboard, `--resume`'s first look), so a
run folder is read one way: the manifest validated once through `RunManifest.read` (older formats upgraded there,
a newer one refused naming the file), results.sqlite opened read-only for each read (never created, never written:
a run on read-only media reports, and counting a run in progress leaves its writer undisturbed). Writing stays with
`Store` and `RunManifest.write`. Benchmarks' plot commands sit below the run layers and read results with
`rig.runformat.read_results`, the query this class uses too.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from rig.records import EpisodeResult
from rig.runfolder.config import BenchmarkInfo
from rig.runfolder.manifest import RunManifest
from rig.runfolder.summary import RunSummary, benchmark_of, summarize
from rig.runformat import NewerFormatError, RunFileError, count_results, read_gpu_samples, read_results
from rig.telemetry.gpu import GpuSample

MANIFEST = "manifest.json"
RESULTS = "results.sqlite"


def read_manifest(run_dir: Path) -> RunManifest:
    """The run's manifest; a missing or broken manifest.json is a RunFileError naming it, one from a newer rig a
    NewerFormatError naming it."""
    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        raise RunFileError(f"{path}: not found (is {run_dir} a run directory?)")
    try:
        return RunManifest.read(Path(run_dir))
    except NewerFormatError:
        raise
    except ValidationError as e:  # its first line only counts the errors: name the first field instead
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "the whole file"
        raise RunFileError(f"{path}: damaged manifest ({where}: {err['msg']})") from None
    except (ValueError, OSError) as e:  # an InputError names the file itself
        raise RunFileError(f"{path}: damaged manifest ({str(e).splitlines()[0].removeprefix(f'{path}: ')})") from None


def run_finished(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` finished (a load level or a comparison's variant kept on `--resume`); a damaged or
    missing manifest is not finished: the run is resumed, and its own checks name the problem."""
    try:
        return read_manifest(run_dir).status == "finished"
    except (RunFileError, NewerFormatError):
        return False


class RunFolder:
    """A run folder opened for reading. The manifest is read when the folder is opened (so a folder that is not a
    run is refused at once); results are read on first use and kept, and each summary is computed once."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.manifest = read_manifest(self.path)
        self._results: dict[str | None, list[EpisodeResult]] = {}
        self._summaries: dict[str | None, RunSummary] = {}

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS

    @property
    def benchmarks(self) -> list[BenchmarkInfo]:
        """The run's benchmarks, in the order it ran them."""
        return self.manifest.config.benchmarks

    def benchmark(self, name: str) -> BenchmarkInfo:
        for b in self.benchmarks:
            if b.name == name:
                return b
        raise KeyError(f"{self.path / MANIFEST}: the run has no benchmark {name!r}")

    @property
    def planned(self) -> int:
        """Episodes x repeats the run was planned with (what `RunSummary.expected_episodes` counts over all)."""
        return sum(b.episodes for b in self.benchmarks) * self.manifest.config.repeats

    def results(self, benchmark: str | None = None) -> list[EpisodeResult]:
        """The stored results of one benchmark (None: every stored result), in key order; read once."""
        if benchmark not in self._results:
            self._results[benchmark] = read_results(self.results_path, benchmark)
        return self._results[benchmark]

    def count(self) -> int:
        """Results stored now (read afresh each call: the progress of a run in progress)."""
        return count_results(self.results_path)

    def gpu_samples(self) -> list[GpuSample]:
        """The GPU sampler's readings stored with the run, in time order (none on a CPU run)."""
        return [GpuSample(t=t, used_bytes=b) for t, b in read_gpu_samples(self.results_path)]

    def summary(self, benchmark: str | None = None) -> RunSummary:
        """The `RunSummary` of one benchmark, with its headline score; None: of the whole run (every benchmark's
        results, in the run's order), without one. Computed once per folder."""
        if benchmark not in self._summaries:
            if benchmark is None:
                every = [r for b in self.benchmarks for r in self.results(b.name)]
                self._summaries[None] = summarize(self.manifest, every)
            else:
                info = self.benchmark(benchmark)
                self._summaries[benchmark] = summarize(
                    self.manifest, self.results(benchmark), info, benchmark_of(info).headline
                )
        return self._summaries[benchmark]

    def summaries(self) -> list[RunSummary]:
        """One `RunSummary` per benchmark of the run, each with its headline score."""
        return [self.summary(b.name) for b in self.benchmarks]
