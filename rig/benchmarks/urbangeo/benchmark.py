"""UrbanGeoEval (paper: UrbanGeoEval): knowledge probes and reasoning tasks generated from map packs, scored by
program where the truth is deterministic and by a local judge model for the reasoning (hybrid framework).

The paper's dataset is not public; both modules are generated from any map pack, seeded and deterministic.

Options: ``UrbanGeoEval.Options`` (README: Running it).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from rig.agents.single import repeat_sampling
from rig.benchmarks.base import (
    Benchmark,
    BenchmarkOptions,
    CommaList,
    DataError,
    MetricRole,
    RunContext,
    SelftestMode,
    Table,
)
from rig.benchmarks.urbangeo import gold
from rig.benchmarks.urbangeo import knowledge as K
from rig.benchmarks.urbangeo import reasoning as R
from rig.benchmarks.urbangeo.judge import REASON_MAX, Judge, JudgeConfigError, Verdict
from rig.benchmarks.urbangeo.prompts import knowledge_messages, reasoning_messages
from rig.benchmarks.urbangeo.scoring import parse_letter, program_answer, sections
from rig.benchmarks.urbangeo.tables import PROGRAM_TASKS, judged_by, urbangeo_tables
from rig.decoding.constraint import Constraint
from rig.engines.base import Engine

if TYPE_CHECKING:
    from rig.agents.scripted import Player
from rig.records import ChatRequest, Episode, EpisodeResult, Generation
from rig.scoring.taxonomy import FailureClass

log = logging.getLogger(__name__)

GENERATOR_VERSION = "1"


# Each reason as a shared class; an answer read and scored without an error category is a wrong one.
FAILURE_CLASSES: dict[str, FailureClass] = {
    "unreadable_answer": "malformed_output",
    "no_answer": "malformed_output",
    "judge_error": "judge_failure",
    "judge_unparsed": "judge_failure",
    "wrong option": "wrong_answer",
    "below half the points": "wrong_answer",
}


class UrbanGeoEval(Benchmark):
    name = "urbangeo"
    headline_name = "MCQ / reasoning score"
    # a knowledge answer is 0 or 1; the reasoning total is partial: half its points is a success (the report's rule)
    success_threshold = 0.5
    success_note = "MCQ correct; reasoning total >= 50% of its points"
    failure_classes = FAILURE_CLASSES
    version = "1"

    class Options(BenchmarkOptions):
        pack: CommaList | None = Field(
            None,
            description="map packs, comma-separated, one city each (default: the "
            "embedded `helsinki`; `--data DIR` names one pack instead)",
        )
        modules: CommaList = Field(["knowledge", "reasoning"], description="which modules to generate")
        templates: CommaList | None = Field(
            None, description="knowledge templates, names of the paper's Table 2 (default: all 20)"
        )
        tasks: CommaList | None = Field(
            None, description="reasoning tasks of DS, DR, RE, PN, PR, NV, RC (default: all 7)"
        )
        n_per_template: int = Field(10, ge=1, description="questions per template per city (the paper: 150)")
        n_per_task: int = Field(10, ge=1, description="problems per task per city")
        seed: int = Field(0, description="generation seed (independent of the sampling seed)")
        choice: Literal["auto", "on", "off"] = Field(
            "auto",
            description="constrain the knowledge reply to one option letter; `auto`: when `--decode` is not `none`",
        )
        knowledge_max_tokens: int = Field(16, ge=1, description="cap on a knowledge reply")
        max_tokens: int = Field(
            1024, ge=1, description="cap on a reasoning reply (the model's own `max_tokens` applies when lower)"
        )
        judge: str | None = Field(
            None,
            description="models.yaml entry of the judge (default: the candidate "
            "itself); another entry is loaded once and closed at teardown",
        )
        judge_temperature: float = Field(
            0.6, description="judge sampling temperature, 0..2 (the paper's 0.6, appendix B.2)"
        )
        judge_max_tokens: int = Field(512, ge=1, description="cap on a judge reply")
        judge_decode: Literal["none", "verdict"] = Field(
            "none", description="`verdict`: the judge's reply is constrained to the score line alone"
        )
        judge_models: str | None = Field(None, description="models.yaml to find the judge in (default: rig's)")
        judge_gpu: int | None = Field(
            None, ge=0, description="GPU ordinal for a separately loaded judge (default: CPU)"
        )

        @field_validator("pack")
        @classmethod
        def _some_pack(cls, v: list[str] | None) -> list[str] | None:
            if v is not None and not v:
                raise ValueError("names no map pack")
            return v

        @field_validator("modules")
        @classmethod
        def _known_modules(cls, v: list[str]) -> list[str]:
            bad = [m for m in v if m not in ("knowledge", "reasoning")]
            if bad or not v:
                raise ValueError(f"{bad or 'empty'}; choose from knowledge, reasoning")
            return v

        @field_validator("templates")
        @classmethod
        def _known_templates(cls, v: list[str] | None) -> list[str] | None:
            bad = [t for t in v or [] if t not in K.TEMPLATES]
            if bad:
                raise ValueError(f"unknown {bad}; known: {', '.join(K.TEMPLATES)}")
            return v

        @field_validator("tasks")
        @classmethod
        def _known_tasks(cls, v: list[str] | None) -> list[str] | None:
            v = None if v is None else [t.upper() for t in v]
            bad = [t for t in v or [] if t not in R.TASKS]
            if bad:
                raise ValueError(f"unknown {bad}; known: {', '.join(R.TASKS)}")
            return v

        @field_validator("judge_temperature")
        @classmethod
        def _judge_temperature(cls, v: float) -> float:
            if not 0.0 <= v <= 2.0:
                raise ValueError("must be within 0..2")
            return v

    @classmethod
    def default_data(cls) -> Path:
        from rig.maps.locate import PackNotFound, helsinki_pack_dir

        try:
            return helsinki_pack_dir()
        except PackNotFound as exc:
            raise DataError(f"urbangeo: {exc}") from None

    def __init__(self, data: Path | None = None, options: Any = None) -> None:
        # "helsinki", not the cache path: a run's recorded data then resolves on any machine (report, resume).
        super().__init__(Path("helsinki") if data is None else data, options)
        o = self.opts
        # The packs are the data: -O pack=... wins; --data DIR is one pack; neither: the embedded Helsinki pack.
        if o.pack is not None:
            if data is not None and Path(data) != Path(o.pack[0]):
                raise DataError(f"urbangeo: pass either --data {data} or -O pack=..., not both")
            self.data = Path(o.pack[0])
        self.pack_values: list[str] = o.pack or [str(self.data)]
        self.templates: list[str] = o.templates or list(K.TEMPLATES)
        self.tasks: list[str] = o.tasks or list(R.TASKS)
        try:
            self.judge = Judge(
                o.judge,
                o.judge_temperature,
                o.judge_max_tokens,
                o.judge_decode,
                Path(o.judge_models) if o.judge_models else None,
                o.judge_gpu,
            )
        except JudgeConfigError as exc:
            raise DataError(f"urbangeo option {exc}") from None
        self._cities: list[Any] | None = None
        self._episodes: list[Episode] | None = None
        self.shortfall: dict[str, int] = {}  # "city/template": questions missing from n (the pack had too few)

    # ---- data --------------------------------------------------------------------------------------------------

    def cities(self) -> list[Any]:
        if self._cities is None:
            from rig.benchmarks.urbangeo.world import City
            from rig.maps.locate import PackNotFound, resolve_pack_dir

            out = []
            for v in self.pack_values:
                try:
                    out.append(City(resolve_pack_dir(v)))
                except (PackNotFound, FileNotFoundError, ValueError) as exc:
                    raise DataError(f"urbangeo map pack {v}: {exc}") from None
            self._cities = out
        return self._cities

    def _slugs(self) -> list[str]:
        """One id prefix per city; two packs of one city are told apart by their directory."""
        cs = self.cities()
        names = [c.name for c in cs]
        return [(c.name if names.count(c.name) == 1 else f"{c.name}@{c.dir.name}").replace("/", "_") for c in cs]

    def episodes(self) -> list[Episode]:
        if self._episodes is not None:
            return self._episodes
        out: list[Episode] = []
        for city, slug in zip(self.cities(), self._slugs(), strict=True):
            if "knowledge" in self.opts.modules:
                for t in self.templates:
                    qs = K.generate(city, t, self.opts.n_per_template, self.opts.seed)
                    self._short(f"{slug}/{t}", len(qs), self.opts.n_per_template)
                    dim, strategy = K.TEMPLATES[t].dimension, K.TEMPLATES[t].strategy
                    for i, q in enumerate(qs):
                        eid = f"k/{slug}/{t}/{i:03d}"
                        letters = K.LETTERS[: len(q.options)]
                        out.append(
                            Episode(
                                benchmark=self.name,
                                id=eid,
                                messages=knowledge_messages(q.question, q.options, letters),
                                ground_truth={
                                    "answer": q.letter,
                                    "letters": letters,
                                    "options": q.options,
                                    "facts": q.facts,
                                },
                                tags={
                                    "module": "knowledge",
                                    "city": city.name,
                                    "template": t,
                                    "dimension": dim,
                                    "strategy": strategy,
                                    "question": eid,
                                },
                                prefix_group="urbangeo/knowledge",
                            )
                        )  # one system prompt for every question
            if "reasoning" in self.opts.modules:
                for t in self.tasks:
                    ps = R.generate(city, t, self.opts.n_per_task, self.opts.seed)
                    self._short(f"{slug}/{t}", len(ps), self.opts.n_per_task)
                    for i, p in enumerate(ps):
                        eid = f"r/{slug}/{t}/{i:03d}"
                        out.append(
                            Episode(
                                benchmark=self.name,
                                id=eid,
                                messages=reasoning_messages(t, p.prompt),
                                ground_truth={
                                    "task": t,
                                    "truth": p.truth,
                                    "truth_text": p.truth_text,
                                    "facts": p.facts,
                                },
                                tags={
                                    "module": "reasoning",
                                    "city": city.name,
                                    "task": t,
                                    "task_name": R.TASKS[t][0],
                                    "tier": R.TASKS[t][1],
                                    "subtype": p.subtype or "-",
                                    "question": eid,
                                },
                                prefix_group=f"urbangeo/reasoning/{t}",
                            )
                        )  # the system prompt differs per task
        self._episodes = out
        return out

    def _short(self, key: str, got: int, want: int) -> None:
        if got < want:
            self.shortfall[key] = want - got
            log.warning("urbangeo: %s: %d of %d questions (the pack has too few distinct ones)", key, got, want)

    def data_hash(self) -> str:
        """Pack contents, generator version and generation options; plus the generated episodes themselves, so a
        code change that alters questions without a version bump still changes the hash."""
        h = hashlib.sha256()
        o = self.opts  # the options that change the episodes, parsed: "010" and "10" agree
        generation = {
            "modules": o.modules,
            "templates": self.templates,
            "tasks": self.tasks,
            "n_per_template": o.n_per_template,
            "n_per_task": o.n_per_task,
            "seed": o.seed,
        }
        head = {
            "generator": GENERATOR_VERSION,
            "packs": [c.source_sha256 for c in self.cities()],
            "options": generation,
        }
        h.update(json.dumps(head, sort_keys=True).encode())
        for e in self.episodes():
            h.update(
                json.dumps(
                    [e.id, [m.content for m in e.messages], e.ground_truth],
                    sort_keys=True,
                    ensure_ascii=False,
                    default=str,
                ).encode()
            )
        return h.hexdigest()[:16]

    # ---- one run ---------------------------------------------------------------------------------------------------

    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        if episode.tags.get("module") == "knowledge":
            return await self._knowledge(episode, engine, ctx, repeat)
        return await self._reasoning(episode, engine, ctx, repeat)

    async def _knowledge(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        gt = episode.ground_truth
        letters = gt["letters"]
        constrain = self.opts.choice == "on" or (self.opts.choice == "auto" and ctx.decode != "none")
        constraint = Constraint(kind="choice", choices=list(letters)) if constrain else None
        sampling = repeat_sampling(ctx.sampling, repeat, cap=self.opts.knowledge_max_tokens)
        gen = await engine.chat(ChatRequest(messages=episode.messages, constraint=constraint, sampling=sampling))
        res = EpisodeResult(
            benchmark=self.name,
            episode_id=episode.id,
            repeat=repeat,
            generations=[gen],
            tags={**episode.tags, "answer_constraint": "choice" if constraint else "none"},
            scores={"correct": 0.0, "parsed": 0.0},
        )
        if gen.error:
            res.status, res.error_category, res.error = "failed", "engine_error", gen.error
            return res
        letter = parse_letter(gen.text, letters, gt["options"])
        gen.parse_status = "ok" if letter else "parse_error"
        res.output = {"letter": letter, "answer": gt["answer"]}
        res.scores = {"correct": float(letter == gt["answer"]), "parsed": float(letter is not None)}
        if letter is None:
            res.error_category, res.error = "unreadable_answer", f"no option letter in {gen.text[:80]!r}"
        return res

    async def _reasoning(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        gt = episode.ground_truth
        task = gt["task"]
        rmax = REASON_MAX[task]
        sampling = repeat_sampling(ctx.sampling, repeat, cap=self.opts.max_tokens)
        gen = await engine.chat(ChatRequest(messages=episode.messages, sampling=sampling))
        judge_name = self.judge.model_name(engine)
        res = EpisodeResult(
            benchmark=self.name,
            episode_id=episode.id,
            repeat=repeat,
            generations=[gen],
            tags={
                **episode.tags,
                "judge": judge_name,
                "judge_self": "yes" if judge_name == engine.spec.name else "no",
                "judge_temperature": f"{self.judge.temperature:g}",
            },
        )
        scores = _unscored(rmax)
        res.scores = scores
        judge_info: dict[str, Any] = {
            "model": judge_name,
            "temperature": self.judge.temperature,
            "decode": self.judge.decode,
            "status": "not judged",
        }
        if gen.error:
            if task in PROGRAM_TASKS:
                scores["answer"] = scores["answer_program"] = 0.0
            res.output = {"judge": judge_info}
            res.status, res.error_category, res.error = "failed", "engine_error", gen.error
            return res
        sec = sections(gen.text)
        scores["answer_section"] = float(sec.status == "ok")
        program, read = program_answer(task, sec.answer, gt["truth"], gt["facts"])
        scores["answer_program"] = program
        for k, v in read.items():  # numeric diagnostics (abs_error_km, misplaced, route_in_order, ...)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                scores[k] = float(v)
        # The user message is the question with its context; the judge sees it, the reply and the reference.
        verdict, jgen = await self.judge.grade(
            engine, task, episode.messages[-1].content, gen.text, gt["truth_text"], seed=ctx.sampling.seed + repeat
        )
        judge_info.update(_verdict_record(verdict, jgen))
        if verdict.ok:
            scores["judge_parsed"] = 1.0
            scores["reason"], scores["answer_judge"] = verdict.reason, verdict.answer
        scores["answer"] = program if task in PROGRAM_TASKS else scores["answer_judge"]
        if scores["reason"] is not None and scores["answer"] is not None:
            scores["total"] = round(scores["reason"] + scores["answer"], 2)
            scores["total_pct"] = round(100.0 * scores["total"] / (rmax + 10), 2)  # type: ignore[operator]
        res.output = {
            "answer_text": sec.answer,
            "answer_status": sec.status,
            "read": {k: v for k, v in read.items()},
            "judge": judge_info,
        }
        if verdict.status == "error":
            res.error_category, res.error = "judge_error", verdict.detail
        elif not verdict.ok:
            res.error_category, res.error = "judge_unparsed", f"{verdict.status}: {verdict.detail}"
        elif sec.status == "missing":
            res.error_category, res.error = "no_answer", "the reply has no <answer> section"
        return res

    async def teardown(self) -> None:
        """Close a separately loaded judge model."""
        await self.judge.aclose()

    def gold(self, episode: Episode, ctx: RunContext) -> Player:
        return gold.player(episode, right=True)

    def anti_gold(self, episode: Episode, ctx: RunContext) -> Player:
        return gold.player(episode, right=False)

    @classmethod
    def selftest_modes(cls) -> list[SelftestMode]:
        # the knowledge letter free and held to the choices; the judge's verdict free and held to its grammar
        return [
            SelftestMode(options={"n_per_template": 2, "n_per_task": 2}, decode=decode) for decode in ("none", "json")
        ] + [SelftestMode(options={"modules": "reasoning", "n_per_task": 2, "judge_decode": "verdict"})]

    @classmethod
    def selftest_metrics(cls, options: Any) -> dict[str, MetricRole]:
        return gold.metrics(options)

    @classmethod
    def selftest_maxima(cls, options: Any) -> dict[str, float]:
        return gold.MAXIMA

    @classmethod
    def selftest_caps(cls, options: Any) -> dict[str, str]:
        return gold.CAPS

    @classmethod
    def headline(cls, result: EpisodeResult) -> float | None:
        if result.tags.get("module") == "knowledge":
            return result.scores.get("correct")
        pct = result.scores.get("total_pct")
        return None if pct is None else pct / 100.0

    @classmethod
    def failure_detail(cls, result: EpisodeResult) -> str:
        if result.error_category:
            return result.error_category
        return "wrong option" if result.tags.get("module") == "knowledge" else "below half the points"

    @classmethod
    def headline_source(cls, results: list[EpisodeResult], options: Any) -> str | None:
        """The reasoning total rests on the judge's R: name it ("self-judged" when the candidate graded itself)."""
        return judged_by(results, options) if any(r.tags.get("module") == "reasoning" for r in results) else None

    @classmethod
    def tables(cls, results: list[EpisodeResult], options: Any, label: str = "") -> list[Table]:
        return urbangeo_tables(results, label, options)


def _unscored(rmax: int) -> dict[str, float | None]:
    """A reasoning episode's scores before anything is read: out of ``rmax`` reasoning points plus 10 for the answer."""
    return {
        "reason": None,
        "answer": None,
        "answer_program": None,
        "answer_judge": None,
        "points_max": float(rmax + 10),
        "total": None,
        "total_pct": None,
        "judge_parsed": 0.0,
        "answer_section": 0.0,
    }


def _verdict_record(verdict: Verdict, jgen: Generation | None) -> dict[str, Any]:
    """What the output keeps of the judge's verdict and, when it answered, of its generation."""
    out: dict[str, Any] = dict(
        status=verdict.status, detail=verdict.detail, reason=verdict.reason, answer=verdict.answer
    )
    if jgen is not None:
        out.update(
            text=jgen.text,
            prompt_tokens=jgen.prompt_tokens,
            completion_tokens=jgen.completion_tokens,
            e2e_s=jgen.timings.e2e_s,
            finish_reason=jgen.finish_reason,
        )
    return out
