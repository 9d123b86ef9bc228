"""UrbanGeoEval (paper: UrbanGeoEval): knowledge probes and reasoning tasks generated from map packs, scored by
program where the truth is deterministic and by a local judge model for the reasoning (hybrid framework).

The paper's dataset is not public; both modules are generated from any map pack, seeded and deterministic.

Options (-O key=value):
  pack=helsinki|DIR[,DIR...]  map packs, one city each (default: the embedded Helsinki pack, built on first use into
                              the rig cache; --data DIR names one pack)
  modules=knowledge,reasoning which modules to generate (default both)
  templates=NAME[,NAME...]    knowledge templates (default: all 20 of Table 2)
  tasks=DS,DR,RE,PN,PR,NV,RC  reasoning tasks (default: all 7)
  n_per_template=N            questions per template per city (default 10; the paper has 150)
  n_per_task=N                problems per task per city (default 10)
  seed=N                      generation seed (default 0); independent of the sampling seed
  choice=auto|on|off          constrain the knowledge answer to one option letter (auto: when --decode is not none)
  knowledge_max_tokens=N      cap on a knowledge reply (default 16)
  max_tokens=N                cap on a reasoning reply (default 1024; the model's max_tokens applies when lower)
  judge=NAME                  models.yaml entry of the judge (default: the candidate model itself)
  judge_temperature=T         judge sampling temperature (default 0.6, the paper's)
  judge_max_tokens=N          cap on a judge reply (default 512)
  judge_decode=none|verdict   verdict: the judge's reply is constrained to the score line alone (default none)
  judge_models=FILE           models.yaml to find the judge in (default: rig's)
  judge_gpu=N                 GPU ordinal for a separately loaded judge (default: CPU)
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from rig.agents.single import repeat_sampling
from rig.benchmarks.base import Benchmark, DataError, RunContext, Table
from rig.benchmarks.urbangeo import knowledge as K
from rig.benchmarks.urbangeo import reasoning as R
from rig.benchmarks.urbangeo.judge import REASON_MAX, Judge, JudgeConfigError
from rig.benchmarks.urbangeo.prompts import knowledge_messages, reasoning_messages
from rig.benchmarks.urbangeo.scoring import parse_letter, program_answer, sections
from rig.benchmarks.urbangeo.tables import urbangeo_tables
from rig.decoding.constraint import Constraint
from rig.engines.base import Engine
from rig.records import ChatRequest, Episode, EpisodeResult

log = logging.getLogger(__name__)

GENERATOR_VERSION = "1"
OPTIONS = ("pack", "modules", "templates", "tasks", "n_per_template", "n_per_task", "seed", "choice",
           "knowledge_max_tokens", "max_tokens", "judge", "judge_temperature", "judge_max_tokens", "judge_decode",
           "judge_models", "judge_gpu")
# Options that change the generated episodes (the packs enter data_hash by content, not by how they were named).
GENERATION_OPTIONS = ("modules", "templates", "tasks", "n_per_template", "n_per_task", "seed")
PROGRAM_TASKS = ("DS", "DR", "RE", "PN", "PR")  # answer scored by program; NV and RC by the judge


def _split(value: Any) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


class UrbanGeoEval(Benchmark):
    name = "urbangeo"
    version = "1"
    OPTIONS = OPTIONS

    @classmethod
    def default_data(cls) -> Path:
        from rig.maps.locate import PackNotFound, helsinki_pack_dir

        try:
            return helsinki_pack_dir()
        except PackNotFound as exc:
            raise DataError(f"urbangeo: {exc}") from None

    def __init__(self, data: Path | None = None, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})  # no super().__init__: the packs, not --data, decide the data
        self.check_options()
        o = self.options
        # The packs are the data: -O pack=... wins; --data DIR is one pack; neither: the embedded Helsinki pack.
        if "pack" in o:
            self.pack_values = _split(o["pack"])
            if not self.pack_values:
                raise DataError("urbangeo option pack: names no map pack")
            if data is not None and Path(data) != Path(self.pack_values[0]):
                raise DataError(f"urbangeo: pass either --data {data} or -O pack=..., not both")
            self.data = Path(self.pack_values[0])
        else:
            # "helsinki", not the cache path: a run's recorded data then resolves on any machine (report, resume).
            self.data = Path(data) if data is not None else Path("helsinki")
            self.pack_values = [str(self.data)]
        self.modules = _split(o.get("modules", "knowledge,reasoning"))
        bad = [m for m in self.modules if m not in ("knowledge", "reasoning")]
        if bad or not self.modules:
            raise DataError(f"urbangeo option modules: {bad or 'empty'}; choose from knowledge, reasoning")
        self.templates = _split(o["templates"]) if "templates" in o else list(K.TEMPLATES)
        bad = [t for t in self.templates if t not in K.TEMPLATES]
        if bad:
            raise DataError(f"urbangeo option templates: unknown {bad}; known: {', '.join(K.TEMPLATES)}")
        self.tasks = [t.upper() for t in _split(o["tasks"])] if "tasks" in o else list(R.TASKS)
        bad = [t for t in self.tasks if t not in R.TASKS]
        if bad:
            raise DataError(f"urbangeo option tasks: unknown {bad}; known: {', '.join(R.TASKS)}")
        self.n_per_template = self.int_option("n_per_template", 10, 1)
        self.n_per_task = self.int_option("n_per_task", 10, 1)
        self.seed = self.int_option("seed", 0)
        self.knowledge_max_tokens = self.int_option("knowledge_max_tokens", 16, 1)
        self.max_tokens = self.int_option("max_tokens", 1024, 1)
        self.choice = str(o.get("choice", "auto"))
        if self.choice not in ("auto", "on", "off"):
            raise DataError(f"urbangeo option choice: {self.choice!r} is not auto, on or off")
        try:
            jt = float(o.get("judge_temperature", 0.6))
        except ValueError:
            raise DataError(f"urbangeo option judge_temperature: {o['judge_temperature']!r} is not a number") from None
        if not 0.0 <= jt <= 2.0:
            raise DataError("urbangeo option judge_temperature: must be within 0..2")
        try:
            self.judge = Judge(str(o["judge"]) if o.get("judge") else None, jt, self.int_option("judge_max_tokens", 512, 1),
                               str(o.get("judge_decode", "none")),
                               Path(str(o["judge_models"])) if o.get("judge_models") else None,
                               self.int_option("judge_gpu", 0, 0) if "judge_gpu" in o else None)
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
        for city, slug in zip(self.cities(), self._slugs()):
            if "knowledge" in self.modules:
                for t in self.templates:
                    qs = K.generate(city, t, self.n_per_template, self.seed)
                    self._short(f"{slug}/{t}", len(qs), self.n_per_template)
                    dim, strategy = K.TEMPLATES[t].dimension, K.TEMPLATES[t].strategy
                    for i, q in enumerate(qs):
                        eid = f"k/{slug}/{t}/{i:03d}"
                        letters = K.LETTERS[:len(q.options)]
                        out.append(Episode(
                            benchmark=self.name, id=eid, messages=knowledge_messages(q.question, q.options, letters),
                            ground_truth={"answer": q.letter, "letters": letters, "options": q.options,
                                          "facts": q.facts},
                            tags={"module": "knowledge", "city": city.name, "template": t, "dimension": dim,
                                  "strategy": strategy, "question": eid},
                            prefix_group="urbangeo/knowledge"))  # one system prompt for every question
            if "reasoning" in self.modules:
                for t in self.tasks:
                    ps = R.generate(city, t, self.n_per_task, self.seed)
                    self._short(f"{slug}/{t}", len(ps), self.n_per_task)
                    for i, p in enumerate(ps):
                        eid = f"r/{slug}/{t}/{i:03d}"
                        out.append(Episode(
                            benchmark=self.name, id=eid, messages=reasoning_messages(t, p.prompt),
                            ground_truth={"task": t, "truth": p.truth, "truth_text": p.truth_text, "facts": p.facts},
                            tags={"module": "reasoning", "city": city.name, "task": t, "task_name": R.TASKS[t][0],
                                  "tier": R.TASKS[t][1], "subtype": p.subtype or "-", "question": eid},
                            prefix_group=f"urbangeo/reasoning/{t}"))  # the system prompt differs per task
        self._episodes = out
        return out

    def _short(self, key: str, got: int, want: int) -> None:
        if got < want:
            self.shortfall[key] = want - got
            log.warning("urbangeo: %s: %d of %d questions (the pack has too few distinct ones)", key, got, want)

    def settings(self) -> dict[str, Any]:
        return {"modules": self.modules, "n_per_template": self.n_per_template, "n_per_task": self.n_per_task,
                "seed": self.seed, "max_tokens": self.max_tokens, "knowledge_max_tokens": self.knowledge_max_tokens,
                "choice": self.choice, "judge": self.judge.name or "the candidate model",
                "judge_temperature": self.judge.temperature, "judge_max_tokens": self.judge.max_tokens,
                "judge_decode": self.judge.decode}

    def data_hash(self) -> str:
        """Pack contents, generator version and generation options; plus the generated episodes themselves, so a
        code change that alters questions without a version bump still changes the hash."""
        h = hashlib.sha256()
        head = {"generator": GENERATOR_VERSION, "packs": [c.source_sha256 for c in self.cities()],
                "options": {k: getattr(self, k) for k in GENERATION_OPTIONS}}  # parsed: "010" and "10" agree
        h.update(json.dumps(head, sort_keys=True).encode())
        for e in self.episodes():
            h.update(json.dumps([e.id, [m.content for m in e.messages], e.ground_truth], sort_keys=True,
                                ensure_ascii=False, default=str).encode())
        return h.hexdigest()[:16]

    # ---- one run ---------------------------------------------------------------------------------------------------

    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        if episode.tags.get("module") == "knowledge":
            return await self._knowledge(episode, engine, ctx, repeat)
        return await self._reasoning(episode, engine, ctx, repeat)

    async def _knowledge(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        gt = episode.ground_truth
        letters = gt["letters"]
        constrain = self.choice == "on" or (self.choice == "auto" and ctx.decode != "none")
        constraint = Constraint(kind="choice", choices=list(letters)) if constrain else None
        sampling = repeat_sampling(ctx.sampling, repeat, min(ctx.sampling.max_tokens, self.knowledge_max_tokens))
        gen = await engine.chat(ChatRequest(messages=episode.messages, constraint=constraint, sampling=sampling))
        res = EpisodeResult(benchmark=self.name, episode_id=episode.id, repeat=repeat, generations=[gen],
                            tags={**episode.tags, "answer_constraint": "choice" if constraint else "none"},
                            scores={"correct": 0.0, "parsed": 0.0})
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
        sampling = repeat_sampling(ctx.sampling, repeat, min(ctx.sampling.max_tokens, self.max_tokens))
        gen = await engine.chat(ChatRequest(messages=episode.messages, sampling=sampling))
        judge_name = self.judge.model_name(engine)
        res = EpisodeResult(benchmark=self.name, episode_id=episode.id, repeat=repeat, generations=[gen],
                            tags={**episode.tags, "judge": judge_name,
                                  "judge_temperature": f"{self.judge.temperature:g}"})
        scores: dict[str, float | None] = {"reason": None, "answer": None, "answer_program": None,
                                           "answer_judge": None, "points_max": float(rmax + 10), "total": None,
                                           "total_pct": None, "judge_parsed": 0.0, "answer_section": 0.0}
        res.scores = scores
        judge_info: dict[str, Any] = {"model": judge_name, "temperature": self.judge.temperature,
                                      "decode": self.judge.decode, "status": "not judged"}
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
        verdict, jgen = await self.judge.grade(engine, task, episode.messages[-1].content, gen.text,
                                               gt["truth_text"], seed=ctx.sampling.seed + repeat)
        judge_info.update(status=verdict.status, detail=verdict.detail, reason=verdict.reason,
                          answer=verdict.answer)
        if jgen is not None:
            judge_info.update(text=jgen.text, prompt_tokens=jgen.prompt_tokens,
                              completion_tokens=jgen.completion_tokens, e2e_s=jgen.timings.e2e_s,
                              finish_reason=jgen.finish_reason)
        if verdict.ok:
            scores["judge_parsed"] = 1.0
            scores["reason"], scores["answer_judge"] = verdict.reason, verdict.answer
        scores["answer"] = program if task in PROGRAM_TASKS else scores["answer_judge"]
        if scores["reason"] is not None and scores["answer"] is not None:
            scores["total"] = round(scores["reason"] + scores["answer"], 2)  # type: ignore[operator]
            scores["total_pct"] = round(100.0 * scores["total"] / (rmax + 10), 2)  # type: ignore[operator]
        res.output = {"answer_text": sec.answer, "answer_status": sec.status,
                      "read": {k: v for k, v in read.items()}, "judge": judge_info}
        if verdict.status == "error":
            res.error_category, res.error = "judge_error", verdict.detail
        elif not verdict.ok:
            res.error_category, res.error = "judge_unparsed", f"{verdict.status}: {verdict.detail}"
        elif sec.status == "missing":
            res.error_category, res.error = "no_answer", "the reply has no <answer> section"
        return res

    async def aclose(self) -> None:
        """Close a separately loaded judge model (the runner has no end-of-run hook; exit closes it otherwise)."""
        await self.judge.aclose()

    def headline(self, result: EpisodeResult) -> float | None:
        if result.tags.get("module") == "knowledge":
            return result.scores.get("correct")
        pct = result.scores.get("total_pct")
        return None if pct is None else pct / 100.0

    # ---- reports ---------------------------------------------------------------------------------------------------

    def tables(self, results: list[EpisodeResult], label: str = "") -> list[Table]:  # type: ignore[override]
        return urbangeo_tables(results, label)
