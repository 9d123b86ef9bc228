"""RouteEval: one generate_running_route call per run, validated on the offline map (paper: RouteEval)."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from rig.agents.scripted import Player
from rig.agents.single import repeat_sampling
from rig.agents.toolmode import effective_mode, prepare, read_calls
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
    embedded_data,
)
from rig.benchmarks.datahash import hash_paths
from rig.benchmarks.routeeval import data as D
from rig.benchmarks.routeeval import gold as G
from rig.benchmarks.routeeval.prompts import ADDRESS_MAX, MAX_WAYPOINTS, TOOL, TOOL_NAME, messages
from rig.benchmarks.routeeval.scoring import MISMATCH, PERFECT, accuracy, check_call, is_mismatch
from rig.benchmarks.routeeval.tables import pack_of_results, routeeval_tables, shipped_pack_facts, tags_of_pack
from rig.benchmarks.routeeval.validate import RouteValidator, Site, store_cities
from rig.engines.base import Engine
from rig.records import ChatRequest, Episode, EpisodeResult, ToolCall
from rig.scoring.taxonomy import FailureClass

log = logging.getLogger(__name__)
# The cap on a reply (its option's default; the model's max_tokens, 512 unless models.yaml says more, applies when
# lower): 12 waypoints with two 120-character strings each fit, a looping reply is cut here.
REPLY_CAP = 768


# Each reason (`failure_detail`: the paper's Table 5 classes, its tool-calling failures told apart) as a shared class.
FAILURE_CLASSES: dict[str, FailureClass] = {
    "timeout": "cut_at_max_tokens",  # an engine error is a failed episode, classed before this table
    "tool_calling_failure: no call": "malformed_output",
    "tool_calling_failure: wrong tool": "wrong_tool",
    "tool_calling_failure: arguments": "wrong_argument",
    "invalid_route_type": "wrong_argument",
    "invalid_waypoint": "invented_entity",  # a place the offline map cannot geocode
    "distance_mismatch": "wrong_answer",
    "other": "other",  # the paper's own "other errors": no map covers the city, a route not measured
}


class RouteEval(Benchmark):
    name = "routeeval"
    headline_name = "route accuracy"
    # accuracy is partial (1 - deviation): a route within 50% of its target is the paper's success (Table 3)
    success_threshold = 1.0 - MISMATCH
    success_note = "route accuracy >= 0.5: within 50% of the target distance, the paper's success (Table 3)"
    failure_classes = FAILURE_CLASSES
    version = "1"

    class Options(BenchmarkOptions):
        prompts: str | None = Field(
            None,
            description="a prompt pack in the data folder: `helsinki` (default) or "
            "`us50` (`--data FILE` names any pack file instead)",
        )
        pack: CommaList = Field(
            ["helsinki"],
            description="map packs, comma-separated; each prompt is validated on the first pack that covers its city",
        )
        replay: str | None = Field(
            None,
            description="a replay store (`rig.maps.replay`) of recorded `geocode` / "
            "`route` answers, consulted before the packs",
        )
        replay_provider: str = Field("rig", description="provider name of those answers in the store")
        missing: Literal["error", "skip"] = Field(
            "error",
            description="a prompt whose city no pack or store covers: "
            "`error` stops before any episode runs; "
            "`skip` drops it",
        )
        max_tokens: int = Field(
            REPLY_CAP,
            ge=1,
            description="cap on the reply (the model's own `max_tokens` applies when lower); 12 full waypoints fit",
        )
        route_measure: Literal["sequence", "closed"] = Field(
            "sequence",
            description="`sequence` (the paper's): the walking route through the waypoints in the order "
            "written; `closed`: a loop is returned to its start and an out-and-back's way out "
            "counted twice when the model left them open",
        )

        @field_validator("pack")
        @classmethod
        def _some_pack(cls, v: list[str]) -> list[str]:
            if not v:
                raise ValueError("names no map pack")
            return v

    @classmethod
    def default_data(cls) -> Path:
        return embedded_data("routeeval", "helsinki.yaml", "RouteEval prompt packs", "--data FILE")

    def __init__(self, data: Path | None = None, options: Any = None) -> None:
        super().__init__(data, options)
        self.replay = Path(self.opts.replay) if self.opts.replay else None
        self._prompts: D.PromptPack | None = None
        self._validator: RouteValidator | None = None
        self._sources: list[str] = []  # hashes of the map data, for data_hash
        self.skipped: list[str] = []

    # ---- data --------------------------------------------------------------------------------------

    def prompt_file(self) -> Path:
        if self.data.is_file():
            if self.opts.prompts is not None:
                raise DataError(f"--data {self.data} is a prompt pack file; drop option prompts")
            return self.data
        name = self.opts.prompts or "helsinki"
        path = self.data / f"{name}.yaml"
        if not path.is_file():
            found = sorted(p.stem for p in self.data.glob("*.yaml"))
            raise DataError(f"routeeval option prompts: no {path}; packs here: {', '.join(found) or 'none'}")
        return path

    def prompts(self) -> D.PromptPack:
        if self._prompts is None:
            self._prompts = D.load_prompt_pack(self.prompt_file())
        return self._prompts

    def validator(self) -> RouteValidator:
        if self._validator is None:
            self._validator = RouteValidator(self._open_sites(), self.prompts().aliases)
        return self._validator

    def _open_sites(self) -> list[Site]:
        from rig.maps.locate import PackNotFound, resolve_pack_dir
        from rig.maps.query import MapPack

        store = None
        cities: set[str] = set()
        if self.replay is not None:
            from rig.maps.replay import ReplayStore

            if not self.replay.is_file():
                raise DataError(f"routeeval option replay: {self.replay} not found")
            try:
                store = ReplayStore(self.replay)
                cities = store_cities(self.replay, self.opts.replay_provider)
            except Exception as exc:  # any unreadable store is the user's data problem
                raise DataError(f"routeeval option replay: {self.replay}: {exc}") from None
            self._sources.append("replay:" + store.content_hash())
        sites = []
        for v in self.opts.pack:
            try:
                d = resolve_pack_dir(v)
                pack = MapPack.open(d)
            except (PackNotFound, FileNotFoundError, ValueError) as exc:
                raise DataError(f"routeeval option pack: {exc}") from None
            self._sources.append("pack:" + pack.info.source_sha256)
            try:
                sites.append(Site(d.name if v != "helsinki" else "helsinki", pack, store, self.opts.replay_provider))
            except ValueError as exc:  # the store keys geocode/route another way
                raise DataError(f"routeeval option replay: {self.replay}: {exc}") from None
        if store is not None and self.replay is not None:  # the store is opened only from a replay path
            sites.append(Site(f"replay:{self.replay.name}", None, store, self.opts.replay_provider, cities))
        return sites

    def data_hash(self) -> str:
        self.validator()
        h = hashlib.sha256(hash_paths([self.prompt_file()]).encode())
        for s in self._sources:
            h.update(s.encode())
        return h.hexdigest()[:16]

    def episodes(self) -> list[Episode]:
        pp = self.prompts()
        v = self.validator()
        uncovered = [p for p in pp.prompts if v.site_for(p.city) is None]
        if uncovered and self.opts.missing == "error":
            cities = sorted({p.city or "" for p in uncovered})
            raise DataError(
                f"{self.prompt_file()}: {len(uncovered)} of {len(pp.prompts)} prompts name a city that no map pack "
                f"or replay store covers: {'; '.join(cities)} (prompts {', '.join(p.id for p in uncovered[:12])}"
                f"{' ...' if len(uncovered) > 12 else ''}). Pass pack=DIR[,DIR...] with packs of those cities, "
                "replay=FILE with recorded answers, or -O missing=skip to run the others."
            )
        self.skipped = [p.id for p in uncovered]
        if self.skipped:
            log.warning(
                "routeeval: skipping %d prompt(s) no map covers: %s", len(self.skipped), ", ".join(self.skipped)
            )
        pack_tags = tags_of_pack(pp)
        out = []
        for p in pp.prompts:
            if p.id in self.skipped:
                continue
            out.append(
                Episode(
                    benchmark=self.name,
                    id=p.id,
                    messages=messages(p.text, p.target_miles),
                    tools=[TOOL],
                    ground_truth={"target_miles": p.target_miles, "route_type": p.route_type, "city": p.city},
                    tags={
                        "question": p.id,
                        "category": p.category,
                        "region": p.region,
                        "length": pp.length_of(p.target_miles),
                        "route_type": p.route_type,
                        "style": p.style,
                        "city": p.city or "generic",
                        **pack_tags,
                    },
                    prefix_group=f"routeeval/{pp.name}",  # one system prompt and tool block for the whole pack
                )
            )
        return out

    # ---- one run -----------------------------------------------------------------------------------

    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        gt = episode.ground_truth
        target = float(gt["target_miles"])
        mode = effective_mode(ctx.tool_mode, engine)
        msgs, req_tools, constraint = prepare(episode.messages, [TOOL], mode)
        sampling = repeat_sampling(ctx.sampling, repeat, cap=self.opts.max_tokens)
        gen = await engine.chat(
            ChatRequest(
                messages=msgs,
                tools=req_tools,
                tool_mode=mode,  # type: ignore[arg-type]
                constraint=constraint,
                sampling=sampling,
            )
        )
        res = EpisodeResult(
            benchmark=self.name,
            episode_id=episode.id,
            repeat=repeat,
            generations=[gen],
            tags={
                **episode.tags,
                "tool_mode": ctx.tool_mode,
                "tool_mode_used": mode,
                "route_measure": self.opts.route_measure,
            },
        )
        res.scores = {
            "accuracy": 0.0,
            "success": 0.0,
            "perfect": 0.0,
            "d_target_mi": target,
            "d_actual_mi": None,
            "n_waypoints": None,
            "d_estimated_mi": None,
            "route_type_match": None,
        }
        if gen.error:  # the engine did not answer: the local counterpart of an API error or timeout
            res.status = "failed"
            return _fail(res, "timeout", f"engine error: {gen.error}")
        calls, _, why, _ = read_calls(gen, [TOOL], mode)
        if not calls:
            if gen.finish_reason == "length":
                return _fail(res, "timeout", f"reply cut at max_tokens ({sampling.max_tokens}) before a complete call")
            return _fail(res, "tool_calling_failure", f"no tool call: {why}")
        call = next((c for c in calls if c.name == TOOL_NAME), None)
        if call is None:
            return _fail(res, "tool_calling_failure", f"called {calls[0].name!r}, not {TOOL_NAME}")
        tc = ToolCall(name=call.name, arguments=call.arguments)
        res.tool_calls = [tc]
        category, reason, args = check_call(call.arguments, MAX_WAYPOINTS, ADDRESS_MAX)
        if category:
            tc.verdict, tc.error, tc.error_category = "invalid", reason, category
            return _fail(res, category, reason or category)
        res.scores.update(
            n_waypoints=float(len(args["addresses"])),
            d_estimated_mi=args["estimated_distance"],
            route_type_match=float(args["route_type"] == gt["route_type"]),
        )
        return self._measure(res, tc, args, gt["city"], target)

    def _measure(
        self, res: EpisodeResult, tc: ToolCall, args: dict[str, Any], city: str, target: float
    ) -> EpisodeResult:
        """The called route measured on the offline map and scored against the target distance."""
        m = self.validator().measure(
            args["route_type"], args["addresses"], city, closed=self.opts.route_measure == "closed"
        )
        tc.answer = {
            "site": m.site,
            "waypoints": [g.model_dump() for g in m.waypoints],
            "legs_m": m.legs_m,
            "closed_by_validator": m.closed_by_validator,
            "doubled": m.doubled,
            "distance_m": m.distance_m,
        }
        if m.waypoints and m.waypoints[0].source in ("hit", "fuzzy", "pack"):
            tc.meta["source"] = m.waypoints[0].source
        res.output = {
            "route_type": args["route_type"],
            "estimated_distance": args["estimated_distance"],
            "waypoints": [{"address": g.address, "name": g.name, "lat": g.lat, "lon": g.lon} for g in m.waypoints],
            "d_actual_mi": m.miles,
        }
        if not m.ok:
            tc.verdict, tc.error, tc.error_category = "invalid", m.error, m.error_category
            return _fail(res, m.error_category or "other", m.error or "route not measured")
        d = float(m.miles)  # type: ignore[arg-type]
        acc = accuracy(d, target)
        # Per run, so that a correct agent's Perfect is checked to be 1 (`rig selftest`) while accuracy itself is capped
        res.scores.update(d_actual_mi=d, accuracy=acc, perfect=float(acc >= PERFECT))
        if is_mismatch(d, target):
            return _fail(
                res, "distance_mismatch", f"route is {d:.2f} mi for a {target:g} mi target (more than 50% off)"
            )
        res.scores["success"] = 1.0
        return res

    @classmethod
    def failure_detail(cls, result: EpisodeResult) -> str:
        why = result.error_category or "wrong answer"
        if why == "tool_calling_failure":  # the paper's one class, told apart by what `run_episode` wrote
            error = result.error or ""
            part = "no call" if error.startswith("no tool call") else "wrong tool" if error.startswith("called") else ""
            return f"{why}: {part or 'arguments'}"
        return why

    @classmethod
    def reference_calls(cls, options: Any) -> ReferenceCalls:
        return ReferenceCalls(
            ("native", "tagged"),
            "RouteEval calls the tool through OpenRouter's tool calling, and a reply of plain text instead of a tool "
            "call is a tool-calling failure (paper, sec. 3.1 and 3.7; a provider's Hermes parser makes <tool_call> "
            "tags a call)",
        )

    @classmethod
    def headline(cls, result: EpisodeResult) -> float | None:
        return result.scores.get("accuracy")

    @classmethod
    def tables(cls, results: list[EpisodeResult], options: Any, label: str = "") -> list[Table]:
        bins, size, name = pack_of_results(results)
        if not name:  # results stored before the pack facts were tagged: a pack shipped with rig still has them
            bins, size, name = shipped_pack_facts(results, options.prompts or "helsinki")
        return routeeval_tables(results, label, bins, size, name)

    # ---- the self-test (`rig selftest`) ------------------------------------------------------------

    def _prompt(self, episode: Episode) -> tuple[D.RoutePrompt, str]:
        """The episode's prompt, and where it is (file and field) for a "gold unavailable" line."""
        i, p = next((i, p) for i, p in enumerate(self.prompts().prompts) if p.id == episode.id)
        return p, f"{self.prompt_file()}: prompts.{i} (id {p.id})"

    def gold(self, episode: Episode, ctx: RunContext) -> Player:
        prompt, where = self._prompt(episode)
        return G.gold(prompt, self.validator(), MAX_WAYPOINTS, where)

    def anti_gold(self, episode: Episode, ctx: RunContext) -> Player:
        return G.anti_gold(*self._prompt(episode))

    @classmethod
    def selftest_modes(cls) -> list[SelftestMode]:
        """Both route measures in every tool mode (--decode does not apply: the tool mode is the output axis)."""
        return [
            SelftestMode(options={"route_measure": m}, tool_mode=t)
            for m in ("sequence", "closed")
            for t in ("native", "prompt", "json", "yaml")
        ]

    @classmethod
    def selftest_metrics(cls, options: Any) -> dict[str, MetricRole]:
        return G.metrics()

    @classmethod
    def selftest_caps(cls, options: Any) -> dict[str, str]:
        return dict(G.CAPS)


def _fail(res: EpisodeResult, category: str, why: str) -> EpisodeResult:
    res.error_category, res.error = category, why
    return res
