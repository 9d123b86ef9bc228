"""CallNavi: API routing and parameter generation over unfiltered API lists (paper: CallNavi, sec. 5-6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import Field

from rig.agents.scripted import Player
from rig.agents.single import repeat_sampling, single_call
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
from rig.benchmarks.callnavi import data as D
from rig.benchmarks.callnavi import gold as G
from rig.benchmarks.callnavi.prompts import answer_schema, build_prompt
from rig.benchmarks.callnavi.scoring import score_both, scored_modes, with_modes, zero_scores
from rig.benchmarks.callnavi.tables import callnavi_tables
from rig.benchmarks.datahash import hash_paths
from rig.decoding.constraint import Constraint
from rig.engines.base import Engine
from rig.records import Episode, EpisodeResult, Message
from rig.scoring.taxonomy import FailureClass

MAX_TOKENS = {"routing": 128, "params": 384}

# Each reason (`failure_detail`: the error's first word, and for an AST failure its verdict) as a shared class.
FAILURE_CLASSES: dict[str, FailureClass] = {
    "parse": "malformed_output",
    "cut": "cut_at_max_tokens",
    "routing": "wrong_tool",
    "undeclared API": "invented_entity",
    "ast: empty_prediction": "malformed_output",
    "ast: prediction_not_a_dict": "malformed_output",
    "ast: missing_key_API_or_parameters": "malformed_output",
    "ast: api_not_a_list": "malformed_output",
    "ast: parameters_not_a_list": "malformed_output",
    "ast: parameter_not_a_dict": "malformed_output",
    "ast: reference_crash": "malformed_output",
    "ast: api_list_mismatch": "wrong_tool",
    "ast: parameter_count_mismatch": "wrong_argument",
    "ast: missing_parameter_key": "wrong_argument",
    "ast: value_mismatch": "wrong_argument",
}


class CallNavi(Benchmark):
    name = "callnavi"
    headline_name = "AST match (routing: EM)"  # a routing episode has no AST: its routing exact match counts
    failure_classes = FAILURE_CLASSES
    version = "1"
    flag_options: ClassVar[dict[str, tuple[str, str]]] = {
        "format": ("format", "CallNavi's answer format: json or yaml")
    }

    class Options(BenchmarkOptions):
        format: Literal["json", "yaml"] = Field("json", description="answer format (`--format`; `--decode` implies it)")
        task: Literal["both", "routing", "params"] = Field("both", description="which task to run per question")
        paper_denominators: bool = Field(
            False, description="divide by the paper's Table 2 counts (456/188/85), not the data's"
        )
        domains: CommaList | None = Field(
            None, description="domains to run, comma-separated (default: all in the data)"
        )
        mode: Literal["paper", "reference"] = Field(
            "paper",
            description="metric mode of the main table; both are computed and stored (`reference`: as the public "
            "judge scripts score, no GPT repair; JSON answers only)",
        )

    @classmethod
    def default_data(cls) -> Path:
        return embedded_data("callnavi/sample", ".", "CallNavi sample")

    def __init__(self, data: Path | None = None, options: Any = None) -> None:
        super().__init__(data, options)
        self.tasks = D.TASKS if self.opts.task == "both" else (self.opts.task,)
        self._domains: dict[str, D.Domain] | None = None
        if self.opts.mode == "reference" and self.opts.format != "json":
            raise DataError(
                "callnavi option mode=reference scores JSON answers only (the judge scripts read JSON); "
                "use format=json or mode=paper"
            )

    def domains(self) -> dict[str, D.Domain]:
        if self._domains is None:
            names = D.discover_domains(self.data)
            wanted_l = self.opts.domains
            if wanted_l:
                unknown = set(wanted_l) - set(names)
                if unknown:
                    raise DataError(f"{self.data}: option domains names {sorted(unknown)}, not present")
                names = [n for n in names if n in wanted_l]
            domains = {n: D.load_domain(self.data, n, strict=self.strict_gold) for n in names}
            first: dict[str, str] = {}
            for n, dom in domains.items():
                for q in dom.questions:
                    if q.id in first:  # episode ids are question ids, across domains too
                        raise DataError(
                            f"{self.data / 'Questions' / (n + '.json')}: question id {q.id!r} is also in "
                            f"Questions/{first[q.id]}.json"
                        )
                    first[q.id] = n
            self._domains = domains
        return self._domains

    def data_hash(self) -> str:
        return hash_paths(D.data_files(self.data, list(self.domains())))

    def episodes(self) -> list[Episode]:
        out = []
        for dom in self.domains().values():
            for q in dom.questions:
                for task in self.tasks:
                    out.append(
                        Episode(
                            benchmark=self.name,
                            id=f"{q.id}/{task}",
                            messages=[
                                Message(role="user", content=build_prompt(dom.apis, q.text, task, self.opts.format))
                            ],
                            ground_truth={"API": q.apis, "parameters": q.parameters}
                            | ({"gold_error": q.gold_error} if q.gold_error else {}),
                            tags={"domain": dom.name, "difficulty": q.difficulty, "task": task, "question": q.id},
                            prefix_group=f"{dom.name}/{self.opts.format}",
                        )
                    )
        return out

    @classmethod
    def implied_options(cls, decode: str) -> dict[str, Any]:
        # a constrained decode that is one of the answer formats sets it (format's own Literal, not a spelled list)
        return {"format": decode} if decode in get_args(cls.Options.model_fields["format"].annotation) else {}

    @classmethod
    def conflicts(cls, options: Any, decode: str, tool_mode: str) -> str | None:
        if decode not in ("none", options.format):
            return (
                f"--decode {decode} conflicts with callnavi.format={options.format} (the answer format it constrains)"
            )
        return None

    def constraint_for(self, episode: Episode, decode: str) -> Constraint | None:
        if decode == "none":
            return None
        apis = self.domains()[episode.tags["domain"]].apis
        schema = answer_schema(apis, episode.tags["task"])
        return Constraint(kind="json_schema" if decode == "json" else "yaml_schema", schema_=schema)

    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        task = episode.tags["task"]
        if ctx.decode not in ("none", self.opts.format):
            raise DataError(f"--decode {ctx.decode} does not match callnavi --format {self.opts.format}")
        sampling = repeat_sampling(ctx.sampling, repeat, cap=MAX_TOKENS[task])
        constraint = self.constraint_for(episode, ctx.decode)
        gen = await single_call(engine, episode, sampling, constraint)
        res = EpisodeResult(
            benchmark=self.name,
            episode_id=episode.id,
            repeat=repeat,
            tags={**episode.tags, "mode": self.opts.mode} | G.admitted_tag(episode, constraint),
            generations=[gen],
        )
        if gen.error:
            res.status, res.error_category, res.error = "failed", "engine_error", gen.error
            res.scores = with_modes({m: zero_scores(task) for m in scored_modes(self.opts.format)}, self.opts.mode)
            return res
        res.scores, res.output, reason = score_both(
            gen.text, episode.ground_truth, task, self.opts.format, self.opts.mode
        )
        if reason is not None and reason.startswith("parse:") and gen.finish_reason == "length":
            # scored as the model's failure within the run's budget, but named, so the report says why
            reason = f"cut: at max_tokens ({sampling.max_tokens}), {reason}"
        res.error_category = None if reason is None else reason.split(":")[0]
        # a parsed answer is "ok" however wrong (a wrong API list is scored, not unread)
        gen.parse_status = "parse_error" if res.error_category in ("parse", "cut") else "ok"
        if res.output is not None:  # the answer parsed: how it was written, counted beside the agents' calls
            fenced = gen.text.lstrip().startswith("```")
            gen.call_form = "yaml" if self.opts.format == "yaml" else "fenced" if fenced else "bare"
        res.error = reason
        if reason is not None and reason.startswith(("ast: api_list_mismatch", "routing")):
            declared = {a.name.lower() for a in self.domains()[episode.tags["domain"]].apis}
            named = res.output.get("API") if isinstance(res.output, dict) else res.output
            listed = named if isinstance(named, list) else []
            invented = [a for a in listed if isinstance(a, str) and a.strip().lower() not in declared]
            if invented:
                res.tags["undeclared_api"] = invented[0][:200]  # the taxonomy's invented entity
        return res

    @classmethod
    def reference_calls(cls, options: Any) -> ReferenceCalls:
        return ReferenceCalls(
            ("bare", "fenced", "yaml"),
            "CallNavi's judge scripts strip the ```json fences and parse what is left (its YAML scripts read YAML "
            "answers); rig parses the same, so no answer is read only by rig",
        )

    @classmethod
    def headline(cls, result: EpisodeResult) -> float | None:
        return result.scores.get("ast", result.scores.get("routing"))

    def _where(self, episode: Episode) -> str:
        return str(self.data / "Questions" / f"{episode.tags['domain']}.json")

    def gold(self, episode: Episode, ctx: RunContext) -> Player:
        return G.gold(episode, self.opts.format, self._where(episode))

    def gold_notes(self, episode: Episode) -> list[str]:
        declared = {a.name for a in self.domains()[episode.tags["domain"]].apis}
        lacking = [a for a in episode.ground_truth.get("API", []) if a not in declared]
        if not lacking:
            return []
        apis = self.data / "APIs" / f"{episode.tags['domain']}.json"
        return [
            f"{self._where(episode)}: record {episode.tags['question']!r}.ground_truth.API names "
            f"{', '.join(map(repr, lacking))}, which {apis}'s api_ports lacks (played as written)"
        ]

    def anti_gold(self, episode: Episode, ctx: RunContext) -> Player:
        declared = [a.name for a in self.domains()[episode.tags["domain"]].apis]
        return G.anti_gold(episode, self.opts.format, declared, self._where(episode))

    @classmethod
    def selftest_modes(cls) -> list[SelftestMode]:
        json_modes = [
            SelftestMode(options={"mode": m}, decode=d) for d in ("none", "json") for m in ("paper", "reference")
        ]
        return [*json_modes, SelftestMode(options={"format": "yaml"}), SelftestMode(decode="yaml")]

    @classmethod
    def selftest_metrics(cls, options: Any) -> dict[str, MetricRole]:
        return G.metrics(options)

    @classmethod
    def failure_detail(cls, result: EpisodeResult) -> str:
        if "undeclared_api" in result.tags:
            return "undeclared API"
        why = result.error or result.error_category or "wrong answer"
        head, _, rest = why.partition(":")
        return f"ast: {rest.split()[0]}" if head == "ast" and rest.split() else head

    @classmethod
    def tables(cls, results: list[EpisodeResult], options: Any, label: str = "") -> list[Table]:
        return callnavi_tables(results, label, options.paper_denominators, options.format)
