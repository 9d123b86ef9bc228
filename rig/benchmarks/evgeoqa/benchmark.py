"""EVGeoQA / GeoRover: find a charging station within walking distance of a place for a second activity, by exploring
with four local tools; Hits@1/2/3 by distance tier (paper: EVGeoQA, sec. 3-5).

Data: queries generated over a map pack (default: the embedded Helsinki pack), or the upstream files with
``--data DIR`` (``QA_Pairs.json`` and ``Stations.json``, JSON Lines). Options: ``EVGeoQA.Options``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from rig.agents.scripted import Player
from rig.agents.single import repeat_sampling
from rig.benchmarks.base import (
    Benchmark,
    BenchmarkOptions,
    CommaList,
    DataError,
    MetricRole,
    ReferenceCalls,
    RunContext,
    SelftestMode,
    Table,
    read_data,
)
from rig.benchmarks.evgeoqa import gold as G
from rig.benchmarks.evgeoqa.agents import MAX_FORMAT_ERRORS, MAX_STEPS, messages_for, run_georover
from rig.benchmarks.evgeoqa.data import Dataset, Query
from rig.benchmarks.evgeoqa.scoring import ARGUMENT_ERRORS, StationIndex, classify, hits
from rig.benchmarks.evgeoqa.tables import evgeoqa_tables
from rig.benchmarks.evgeoqa.tools import CHANGE_LOCATION, FINAL, tool_specs
from rig.benchmarks.evgeoqa.world import World
from rig.engines.base import Engine
from rig.records import Episode, EpisodeResult
from rig.scoring.taxonomy import FailureClass

GENERATED = Path("generated-from-pack")  # the recorded data path of generated queries (no machine path)
# The cap on one reply (its option's default; the model's max_tokens applies when lower): one JSON tool call per
# reply, a looping reply is cut here. Not the model's default max_tokens (rig.records.DEFAULT_MAX_TOKENS), which it
# only happens to equal: it is recorded in each run's options, so it keeps its value if that one changes.
REPLY_CAP = 512


# Each failure cause (`scoring.classify`, the paper's) as a shared class; a hit at rank 2 or 3 but not 1 has no cause.
FAILURE_CLASSES: dict[str, FailureClass] = {
    "format_error": "malformed_output",
    "max_tool_calls": "budget_spent",
    "hallucinated_station": "invented_entity",
    "factual_conflation": "wrong_answer",
    "argument_error": "wrong_argument",
    "insufficient_exploration": "wrong_answer",
    "wrong answer": "wrong_answer",
}


class EVGeoQA(Benchmark):
    name = "evgeoqa"
    headline_name = "Hits@1"
    failure_classes = FAILURE_CLASSES
    version = "1"

    class Options(BenchmarkOptions):
        pack: str | None = Field(None, description="map pack directory (default: the embedded Helsinki pack)")
        seed: int = Field(0, ge=0, description="seed of the sampled user locations")
        locations: int = Field(24, ge=1, description="user locations sampled over the pack")
        search_radius_m: float | None = Field(
            None, gt=0, description="search radius in metres (default: scaled to the pack's extent, see radii scaling)"
        )
        walk_radius_m: float | None = Field(
            None, gt=0, description="walking radius in metres (default: scaled to the pack's extent)"
        )
        poi_cap: int = Field(20, ge=1, description="places returned per search")
        gt_size: int = Field(5, ge=1, description="ground-truth stations per query")
        phrasing: Literal["intent", "seed", "mixed"] = Field("intent", description="how queries are worded")
        skip_trivial: bool = Field(True, description="drop queries answerable without moving")
        intents: CommaList | None = Field(None, description="intent ids, comma-separated (default: all)")
        city: str = Field("upstream", description="city name for upstream data")
        max_steps: int = Field(MAX_STEPS, ge=1, description="tool budget, the final answer included (the paper's)")
        max_format_errors: int = Field(MAX_FORMAT_ERRORS, ge=0, description="re-prompts after unreadable replies")
        max_tokens: int = Field(
            REPLY_CAP, ge=16, description="cap per call (the model's max_tokens applies when lower)"
        )

        @field_validator("intents")
        @classmethod
        def _known_intents(cls, v: list[str] | None) -> list[str] | None:
            from rig.benchmarks.evgeoqa.data import INTENT_BY_ID

            bad = [i for i in v or [] if i not in INTENT_BY_ID]
            if bad:
                raise ValueError(f"unknown {bad}; known: {', '.join(INTENT_BY_ID)}")
            return v or None

    @classmethod
    def default_data(cls) -> Path:
        return GENERATED  # queries generated over the map pack (option pack); --data names upstream files

    def __init__(self, data: Path | None = None, options: Any = None) -> None:
        super().__init__(data, options)
        self._upstream_files: tuple[Path, Path] | None = None
        self._dataset: Dataset | None = None
        self._world: World | None = None
        self._index: StationIndex | None = None
        self._pack_sha = ""

    # -- data ----------------------------------------------------------------------------------------------

    def _load(self) -> Dataset:
        if self._dataset is not None:
            return self._dataset
        from rig.benchmarks.evgeoqa.importer import QA_NAMES, ImportError_, find_files, load_upstream

        try:
            self._upstream_files = None if self.data == GENERATED else find_files(self.data)
            if self.data != GENERATED and self._upstream_files is None:
                raise DataError(
                    f"evgeoqa --data {self.data}: no upstream QA file there (expected "
                    f"{' or '.join(QA_NAMES)} beside a station table); leave --data out to generate "
                    "queries from the map pack"
                )
            if self._upstream_files is not None:
                self._dataset, self._world = load_upstream(self.data, self.opts.city)
                return self._dataset
        except ImportError_ as exc:
            raise DataError(str(exc)) from None
        from rig.benchmarks.evgeoqa.generator import GenerationError, generate, setting_for
        from rig.benchmarks.evgeoqa.world import PackWorld
        from rig.maps.locate import PackNotFound, resolve_pack_dir
        from rig.maps.query import MapPack

        try:
            pack = MapPack(resolve_pack_dir(self.opts.pack))
        except PackNotFound as exc:
            raise DataError(f"evgeoqa option pack: {exc}") from None
        self._pack_sha = pack.info.source_sha256
        o = self.opts
        setting = setting_for(pack, o.search_radius_m, o.walk_radius_m, o.poi_cap, o.gt_size)
        try:
            self._dataset = generate(
                pack,
                seed=o.seed,
                locations=o.locations,
                setting=setting,
                phrasing=o.phrasing,
                skip_trivial=o.skip_trivial,
                intents=o.intents,
            )
        except GenerationError as exc:
            raise DataError(f"evgeoqa: pack {pack.root}: {exc}") from None
        self._world = PackWorld(pack, setting)
        return self._dataset

    def world(self) -> World:
        self._load()
        assert self._world is not None
        return self._world

    def index(self) -> StationIndex:
        if self._index is None:
            self._index = StationIndex(self._load().stations)
        return self._index

    def dataset(self) -> Dataset:
        return self._load()

    def data_hash(self) -> str:
        ds = self._load()
        h = hashlib.sha256()
        if self._upstream_files:
            for p in self._upstream_files:
                h.update(p.name.encode())
                h.update(read_data(p))
        else:
            h.update(self._pack_sha.encode())
        h.update(ds.model_dump_json().encode())  # the generated queries, radii and notes themselves
        return h.hexdigest()[:16]

    def episodes(self) -> list[Episode]:
        ds = self._load()
        s = ds.setting
        tools = tool_specs(s)
        out = []
        for q in ds.queries:
            out.append(
                Episode(
                    benchmark=self.name,
                    id=q.id,
                    messages=messages_for(q, s),
                    tools=tools,
                    ground_truth={"query": q.model_dump(mode="json"), "setting": s.model_dump(mode="json")},
                    tags={
                        "city": q.city,
                        "tier": str(s.tier(q.tier_distance_m)),
                        "intent": q.intent,
                        "reachable": str(q.reachable).lower(),
                        "template": q.template,
                        "tier_distance_m": f"{q.tier_distance_m:.0f}",
                        "tiers_m": f"{s.tiers_m[0]:g},{s.tiers_m[1]:g}",
                        "search_radius_m": f"{s.search_radius_m:g}",
                        "walk_radius_m": f"{s.walk_radius_m:g}",
                        "source": q.source,
                    },
                    prefix_group=f"{q.city}/{s.search_radius_m:g}/{s.walk_radius_m:g}",
                )
            )
        return out

    # -- running -------------------------------------------------------------------------------------------

    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        q = Query.model_validate(episode.ground_truth["query"])
        sampling = repeat_sampling(ctx.sampling, repeat, cap=self.opts.max_tokens)
        run = await run_georover(
            engine,
            q,
            self.world(),
            mode=ctx.tool_mode,
            sampling=sampling,
            max_steps=self.opts.max_steps,
            max_format_errors=self.opts.max_format_errors,
        )
        out, ex = run.outcome, run.executor
        preds = list((out.final or {}).get("stations") or []) if out.stop == "final" else []
        index = self.index()
        scores: dict[str, float | None] = dict(hits(preds, q.answers, index))
        calls = [c for c in out.tool_calls if c.error_category != "skipped"]
        arg_errors = sum(1 for c in calls if c.error_category in ("invalid_arguments", "unknown_tool"))
        out_of_area = sum(1 for c in calls if c.error_category == "out_of_area")
        scores.update(
            {
                "change_location": float(sum(1 for c in calls if c.name == CHANGE_LOCATION)),
                "tool_calls": float(sum(1 for c in calls if c.name != FINAL)),
                "argument_errors": float(arg_errors),
                "out_of_area": float(out_of_area),
                "format_errors": float(out.format_errors),
                "steps": float(out.steps),
            }
        )
        answer = []
        for p in preds:
            s = index.resolve(p)
            answer.append(
                {
                    "text": p,
                    "station_id": s.station_id if s else None,
                    "lat": s.lat if s else None,
                    "lon": s.lon if s else None,
                    "hit": bool(hits([p], q.answers, index, (1,))["hits@1"]),
                }
            )
        tags = {
            **episode.tags,
            "tool_mode": ctx.tool_mode,
            "mode_used": out.mode_used,
            "max_steps": str(self.opts.max_steps),
            "max_tokens": str(sampling.max_tokens),
            "stop": out.stop,
        }
        res = EpisodeResult(
            benchmark=self.name,
            episode_id=episode.id,
            repeat=repeat,
            tags=tags,
            generations=out.generations,
            tool_calls=out.tool_calls,
            scores=scores,
            output={"final": preds, "stop": out.stop, "answer": answer, "trace": ex.trace()},
        )
        if out.stop == "engine_error":
            res.status, res.error_category, res.error = "failed", "engine_error", out.error
            return res
        res.error_category = classify(
            stop=out.stop,
            hit=bool(scores["hits@3"]),
            preds=preds,
            index=index,
            answers=q.answers,
            seen_stations=ex.seen_stations,
            seen_poi_keys=ex.seen_poi_keys,
            argument_errors=sum(1 for c in calls if c.error_category in ARGUMENT_ERRORS),
        )
        if res.error_category:
            res.error = f"{res.error_category}: stop {out.stop}, answer {preds[:3]}"
        return res

    @classmethod
    def reference_calls(cls, options: Any) -> ReferenceCalls:
        return ReferenceCalls(
            ("bare",),
            "GeoRover's framework prompt has each reply parsed as raw JSON; a code fence or any other text gets its "
            "Wrong_Json re-prompt, and it offers no tools through an API (EVGeoQA notes C4)",
        )

    @classmethod
    def headline(cls, result: EpisodeResult) -> float | None:
        return result.scores.get("hits@1")

    @classmethod
    def tables(cls, results: list[EpisodeResult], options: Any, label: str = "") -> list[Table]:
        return evgeoqa_tables(results, label or "model")

    # -- the self-test (`rig selftest`) ----------------------------------------------------------------------

    def _where(self, episode: Episode) -> str:
        self._load()
        if self._upstream_files is not None:
            return f"{self._upstream_files[0]}: Question_id {episode.id}"
        return f"evgeoqa {self.data}: query {episode.id}"

    def gold(self, episode: Episode, ctx: RunContext) -> Player:
        stations = self._upstream_files[1].name if self._upstream_files is not None else "the map pack"
        return G.gold(episode.ground_truth, self.world(), self._where(episode), stations, self.opts.max_steps)

    def anti_gold(self, episode: Episode, ctx: RunContext) -> Player:
        return G.anti_gold(episode.ground_truth, self.index(), self._where(episode))

    @classmethod
    def selftest_modes(cls) -> list[SelftestMode]:
        """Every tool mode; --decode json and yaml reach GeoRover only as the tool mode they imply."""
        return [
            SelftestMode(tool_mode="native"),
            SelftestMode(tool_mode="prompt"),
            SelftestMode(decode="json", tool_mode="json"),
            SelftestMode(decode="yaml", tool_mode="yaml"),
        ]

    @classmethod
    def selftest_metrics(cls, options: Any) -> dict[str, MetricRole]:
        return G.metrics()
