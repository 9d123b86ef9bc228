"""CallNavi: API routing and parameter generation over unfiltered API lists (paper: CallNavi, sec. 5-6)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any, ClassVar, Literal, get_args

from pydantic import Field

from rig.agents.single import repeat_sampling, single_call
from rig.benchmarks.base import (
    Benchmark,
    BenchmarkOptions,
    CommaList,
    DataError,
    ReferenceCalls,
    RunContext,
    Table,
    embedded_data,
)
from rig.benchmarks.callnavi import data as D
from rig.benchmarks.callnavi.parse import parse_answer
from rig.benchmarks.callnavi.prompts import answer_schema, build_prompt
from rig.benchmarks.callnavi.reference import ref_ast, ref_routing_match, ref_wash
from rig.benchmarks.datahash import hash_paths
from rig.decoding.constraint import Constraint
from rig.engines.base import Engine
from rig.records import Episode, EpisodeResult, Message
from rig.scoring.ast_match import ast_match, routing_exact_match
from rig.scoring.stability import LEV_MAX_CHARS, election_stability, levenshtein_stability

TASKS = ("routing", "params")
MODES = ("paper", "reference")
# The paper's Table 2 counts; its scripts divide by these. The current files hold 456/187/86.
PAPER_DENOMINATORS = {"easy": 456, "medium": 188, "hard": 85, "all": 729}
MAX_TOKENS = {"routing": 128, "params": 384}


class CallNavi(Benchmark):
    name = "callnavi"
    headline_name = "AST match"
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

    predictions = "CallNavi output files (<domain>_<iteration>_para|APIonly_<model>.json)"

    @classmethod
    def default_data(cls) -> Path:
        return embedded_data("callnavi/sample", ".", "CallNavi sample")

    def read_predictions(self, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
        from rig.benchmarks.callnavi.rescore import read_predictions

        return read_predictions(self, files, mode)

    @staticmethod
    def score_reply(
        text: str, gt: dict, task: str, fmt: str, main: str
    ) -> tuple[dict[str, float | None], Any, str | None]:
        """One reply scored as a run scores it (``score_both``), for readers that hold the benchmark (rescore)."""
        return score_both(text, gt, task, fmt, main)

    def __init__(self, data: Path | None = None, options: Any = None) -> None:
        super().__init__(data, options)
        self.tasks = TASKS if self.opts.task == "both" else (self.opts.task,)
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
            domains = {n: D.load_domain(self.data, n) for n in names}
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
                            ground_truth={"API": q.apis, "parameters": q.parameters},
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
        gen = await single_call(engine, episode, sampling, self.constraint_for(episode, ctx.decode))
        res = EpisodeResult(
            benchmark=self.name,
            episode_id=episode.id,
            repeat=repeat,
            tags={**episode.tags, "mode": self.opts.mode},
            generations=[gen],
        )
        if gen.error:
            res.status, res.error_category, res.error = "failed", "engine_error", gen.error
            res.scores = with_modes(
                {m: self._zero_scores(task) for m in scored_modes(self.opts.format)}, self.opts.mode
            )
            return res
        res.scores, res.output, reason = score_both(
            gen.text, episode.ground_truth, task, self.opts.format, self.opts.mode
        )
        if reason is not None and reason.startswith("parse:") and gen.finish_reason == "length":
            # scored as the model's failure within the run's budget, but named, so the report says why
            reason = f"cut: at max_tokens ({sampling.max_tokens}), {reason}"
        gen.parse_status = "ok" if reason is None or reason.startswith("ast:") else "parse_error"
        if res.output is not None:  # the answer parsed: how it was written, counted beside the agents' calls
            fenced = gen.text.lstrip().startswith("```")
            gen.call_form = "yaml" if self.opts.format == "yaml" else "fenced" if fenced else "bare"
        res.error_category = None if reason is None else reason.split(":")[0]
        res.error = reason
        return res

    @staticmethod
    def _zero_scores(task: str) -> dict[str, float | None]:
        if task == "routing":
            return {"routing": 0.0}
        return {"syntax": 0.0, "structure": 0.0, "ast": 0.0, "order": 0.0}

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

    @classmethod
    def tables(cls, results: list[EpisodeResult], options: Any, label: str = "") -> list[Table]:
        return callnavi_tables(results, label, options.paper_denominators, options.format)


def score_output(
    text: str, gt: dict, task: str, fmt: str, mode: str = "paper"
) -> tuple[dict[str, float | None], Any, str | None]:
    """Scores for one answer, the parsed value, and the first failure reason (None when fully correct)."""
    if mode == "reference":
        return _score_reference(text, gt, task)
    if task == "routing":
        value, err = parse_answer(text, fmt, list)
        if value is not None and all(isinstance(v, str) for v in value):
            ok = [v.strip().lower() for v in value] == [a.lower() for a in gt["API"]]
        elif fmt == "json":
            ok = routing_exact_match(text, gt["API"])  # upstream's string normalisation, for prose-ish lists
        else:
            ok = False
        return {"routing": float(ok)}, value, None if ok else (f"parse: {err}" if err else "routing: wrong API list")
    value, err = parse_answer(text, fmt, dict)
    if value is None:
        return {"syntax": 0.0, "structure": 0.0, "ast": 0.0, "order": 0.0}, None, f"parse: {err}"
    v = ast_match(value, gt)
    scores: dict[str, float | None] = {
        "syntax": 1.0,
        "structure": float(v.structure),
        "ast": float(v.ast),
        "order": float(v.order),
    }
    return scores, value, None if v.ast else f"ast: {v.reason}"


def scored_modes(fmt: str) -> tuple[str, ...]:
    """The modes a reply in this format is scored in: the judge scripts read JSON answers only."""
    return MODES if fmt == "json" else ("paper",)


def with_modes(by_mode: dict[str, dict[str, float | None]], main: str) -> dict[str, float | None]:
    """The main mode's scores under their plain keys (what Table 4, the headline and compare read), and every mode's
    also under ``<mode>:<key>``, so one run shows where the judge scripts' rules change a number."""
    out = dict(by_mode[main])
    for m, scores in by_mode.items():
        out.update({f"{m}:{k}": v for k, v in scores.items()})
    return out


def score_both(text: str, gt: dict, task: str, fmt: str, main: str) -> tuple[dict[str, float | None], Any, str | None]:
    """``score_output`` in every mode the format allows; the parsed value and failure reason are the main mode's."""
    if main not in scored_modes(fmt):
        raise ValueError(f"callnavi mode {main} does not read {fmt} answers")
    each = {m: score_output(text, gt, task, fmt, m) for m in scored_modes(fmt)}
    _, value, reason = each[main]
    return with_modes({m: scores for m, (scores, _, _) in each.items()}, main), value, reason


def _score_reference(text: str, gt: dict, task: str) -> tuple[dict[str, float | None], Any, str | None]:
    if task == "routing":
        ok = ref_routing_match(text, gt["API"])
        return {"routing": 1.0 if ok else 0.0}, text, None if ok else "routing: normalised text differs (reference)"
    value, parsed = ref_wash(text)
    v = ref_ast(value, gt)
    scores: dict[str, float | None] = {
        "syntax": float(parsed),
        "structure": float(v.structure),
        "ast": float(v.ast),
        "order": float(v.order),
    }
    if v.ast:
        return scores, value, None
    return scores, value, ("ast: " if parsed else "parse: not JSON after the quote swap (no repair), ") + v.reason


def scored_mode(results: list[EpisodeResult]) -> str:
    """Which mode scored these results (results stored before modes existed were paper mode)."""
    modes = {r.tags.get("mode", "paper") for r in results}
    return modes.pop() if len(modes) == 1 else "mixed (" + ", ".join(sorted(modes)) + ")"


def _rate(rs: list[EpisodeResult], key: str, denom: int | None = None) -> float | None:
    vals = [r.scores.get(key) or 0.0 for r in rs]
    if denom is None:
        return mean(vals) if vals else None
    return sum(vals) / denom if denom else None


T4_COLUMNS = [
    "Model",
    "Routing Easy",
    "Routing Medium",
    "Routing Hard",
    "Routing All",
    "Syntax Validity",
    "Structural Accuracy",
    "AST Easy",
    "AST Medium",
    "AST Hard",
    "AST All Avg",
    "AST Macro Avg",
]
# The metrics both modes compute, as the "where the two modes differ" table names them.
BOTH_METRICS = (
    ("Routing", "routing"),
    ("Syntax Validity", "syntax"),
    ("Structural Accuracy", "structure"),
    ("AST", "ast"),
    ("API order", "order"),
)
NOT_JSON = "Not measured: the judge scripts read JSON answers; these answers are YAML."
REFERENCE_READS = (
    "Reference mode reads the raw reply as the public judge scripts do, with no GPT repair. Routing: the text with "
    "quotes, brackets, spaces, backticks, backslashes and newlines deleted, lower-cased, equals the ground truth's "
    "(a json-tagged code fence leaves 'json' and fails; a space inside an API name is deleted and passes; CRLF line "
    "ends keep their carriage returns and fail). Parameters: every single quote swapped for a double one, only the "
    "json-tagged and bare fences dropped, then json.loads (an apostrophe inside a JSON string, or another fence, is a "
    "syntax failure; a list or a number parses), compared with Python's own == and in (a string entry in "
    "'parameters' is a substring test; where the upstream script would stop, reference_crash). Rules and examples: "
    "benchmarks/callnavi/README.md."
)


def _task_split(results: list[EpisodeResult]) -> tuple[list[EpisodeResult], list[EpisodeResult]]:
    by_task: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by_task[r.tags.get("task", "params")].append(r)
    return by_task.get("routing", []), by_task.get("params", [])


def _has_mode(r: EpisodeResult, mode: str) -> bool:
    return any(k.startswith(mode + ":") for k in r.scores)


def _table4_row(
    results: list[EpisodeResult], label: str, prefix: str, paper_denominators: bool, repeats: int
) -> list[Any]:
    """One row in the paper's Table 4 layout from the scores under ``prefix`` ("" for the main mode's keys)."""
    routing, params = _task_split(results)

    def split(rs: list[EpisodeResult], diff: str) -> list[EpisodeResult]:
        return [r for r in rs if r.tags.get("difficulty") == diff]

    def denom(diff: str) -> int | None:
        return PAPER_DENOMINATORS[diff] * repeats if paper_denominators else None

    row: list[Any] = [label or "model"]
    for diff in D.DIFFICULTIES:
        row.append(_rate(split(routing, diff), prefix + "routing", denom(diff)))
    row.append(_rate(routing, prefix + "routing", denom("all")))
    row.append(_rate(params, prefix + "syntax", denom("all")))
    row.append(_rate(params, prefix + "structure", denom("all")))
    per_diff = [_rate(split(params, d), prefix + "ast", denom(d)) for d in D.DIFFICULTIES]
    row += per_diff
    row.append(_rate(params, prefix + "ast", denom("all")))
    present = [x for x in per_diff if x is not None]
    row.append(mean(present) if len(present) == 3 else None)
    return row


def callnavi_tables(
    results: list[EpisodeResult], label: str = "", paper_denominators: bool = False, fmt: str = "json"
) -> list[Table]:
    """Table 4 in the main mode (the plain keys), then in the other mode (its ``<mode>:`` keys) and where the two
    differ; results stored before both modes were scored show the main mode only, and say so."""
    routing, params = _task_split(results)
    repeats = max((r.repeat for r in results), default=0) + 1
    counts = {
        d: len({r.tags.get("question") for r in results if r.tags.get("difficulty") == d}) for d in D.DIFFICULTIES
    }
    failed = sum(r.status == "failed" for r in results)
    common = (
        f"Questions per difficulty: easy {counts['easy']}, medium {counts['medium']}, hard {counts['hard']}; "
        f"repeats {repeats}. Rates use {'the paper' if paper_denominators else 'the data'}'s denominators. "
        "Syntax validity is strict (no LLM repair). A blank cell means the task was not run."
    )
    if failed:
        common += f" {failed} episode(s) failed in the engine and count as wrong."
    mode = scored_mode(results)
    both_scored = any(_has_mode(r, m) for r in results for m in MODES)
    others = [m for m in MODES if m != mode] if both_scored else []
    note = f"Scored in {mode} mode. {common}"
    if others:
        tables_word = "table follows" if len(others) == 1 else "tables follow"
        note += f" Main mode; the {' and '.join(others)} mode {tables_word}."
    elif results:
        note += (
            " Only this mode was scored: these results were stored before rig scored both modes (a new run, or "
            "`rig rescore` on the output files, shows both)."
        )
    t4 = Table(
        title=f"CallNavi (layout of the paper's Table 4), {mode} mode{' (main)' if others else ''}",
        columns=T4_COLUMNS,
        rows=[_table4_row(results, label, "", paper_denominators, repeats)],
        note=note,
    )
    tables = [t4]
    for m in others:
        covered = [r for r in results if _has_mode(r, m)]
        if covered:
            row = _table4_row(covered, label, f"{m}:", paper_denominators, repeats)
            other_note = f"Scored in {m} mode, from the same replies as the main table ({mode} mode). {common}"
            if len(covered) < len(results):
                other_note += (
                    f" {len(results) - len(covered)} episode(s) stored before rig scored both modes are left out."
                )
        else:
            row = [label or "model"] + [None] * (len(T4_COLUMNS) - 1)
            other_note = NOT_JSON if m == "reference" and fmt == "yaml" else f"Not measured: no {m}-mode scores."
        tables.append(
            Table(
                title=f"CallNavi (layout of the paper's Table 4), {m} mode",
                columns=T4_COLUMNS,
                rows=[row],
                note=other_note,
            )
        )
    if others:
        tables.append(_differ_table(results, label, fmt))
    tables.append(_ci_table(routing, params, label))
    if repeats > 1:
        tables.append(stability_table(results, label))
    tables.append(_domain_table(params, routing))
    tables.append(_failure_table(results))
    return tables


def _differ_table(results: list[EpisodeResult], label: str, fmt: str) -> Table:
    """Per metric both modes compute: each mode's mean over the episodes scored in both, and how many differ."""
    rows = []
    for name, key in BOTH_METRICS:
        pairs = [
            (p, q)
            for r in results
            if (p := r.scores.get(f"paper:{key}")) is not None and (q := r.scores.get(f"reference:{key}")) is not None
        ]
        if pairs:
            rows.append(
                [
                    label or "model",
                    name,
                    len(pairs),
                    mean(p for p, _ in pairs),
                    mean(q for _, q in pairs),
                    sum(p != q for p, q in pairs),
                    sum(p > q for p, q in pairs),
                    sum(q > p for p, q in pairs),
                ]
            )
    note = (
        "Per metric, the mean in each mode over the episodes scored in both, and how many episodes score "
        f"differently (higher in paper mode, higher in reference mode). {REFERENCE_READS}"
    )
    return Table(
        title="CallNavi: where the two modes differ",
        columns=["Model", "Metric", "Episodes", "Paper", "Reference", "Differ", "Paper higher", "Reference higher"],
        rows=rows,
        note=note if rows or fmt != "yaml" else NOT_JSON,
    )


def _ci_table(routing: list[EpisodeResult], params: list[EpisodeResult], label: str) -> Table:
    from rig.scoring.stats import mean_ci

    rows = []
    for name, rs, key in (
        ("Routing All", routing, "routing"),
        ("Syntax Validity", params, "syntax"),
        ("Structural Accuracy", params, "structure"),
        ("AST All Avg", params, "ast"),
    ):
        vals = [r.scores.get(key) or 0.0 for r in rs]
        if len(vals) >= 2:
            m, lo, hi = mean_ci(vals)
            rows.append([label or "model", name, len(vals), m, lo, hi])
    return Table(
        title="CallNavi rates with 95% bootstrap confidence intervals",
        columns=["Model", "Measure", "Episodes", "Rate", "CI low", "CI high"],
        rows=rows,
        note="Percentile bootstrap over episodes (2,000 resamples, seed 0).",
    )


def stability_table(results: list[EpisodeResult], label: str = "") -> Table:
    rows = []
    for task in TASKS:
        outs: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for r in results:
            if r.tags.get("task") == task and r.generations:
                outs[r.episode_id].append((r.repeat, r.generations[-1].text))
        if not outs:
            continue
        seqs = [[t for _, t in sorted(v)] for v in outs.values()]
        rows.append(
            [
                label or "model",
                task,
                len(seqs),
                mean(election_stability(s) for s in seqs),
                mean(levenshtein_stability(s) for s in seqs),
            ]
        )
    return Table(
        title="CallNavi stability over repeats (paper sec. 5.3)",
        columns=["Model", "Task", "Questions", "Election stability", "Levenshtein stability"],
        rows=rows,
        note="Computed on raw outputs after the paper's normalisation (case, whitespace, formatting); the "
        f"Levenshtein score compares the first {LEV_MAX_CHARS:,} characters of each normalised output (answers "
        "are far shorter; the cap bounds the quadratic edit distance on runaway replies).",
    )


def _domain_table(params: list[EpisodeResult], routing: list[EpisodeResult]) -> Table:
    doms = sorted(
        {r.tags.get("domain", "") for r in params + routing},
        key=lambda d: (d not in D.DOMAINS, D.DOMAINS.index(d) if d in D.DOMAINS else 0, d),
    )
    rows = []
    for d in doms:
        p = [r for r in params if r.tags.get("domain") == d]
        q = [r for r in routing if r.tags.get("domain") == d]
        rows.append(
            [
                d,
                len({r.tags.get("question") for r in p + q}),
                _rate(q, "routing"),
                _rate(p, "syntax"),
                _rate(p, "structure"),
                _rate(p, "ast"),
            ]
        )
    return Table(
        title="CallNavi by domain", columns=["Domain", "Questions", "Routing", "Syntax", "Structure", "AST"], rows=rows
    )


def _failure_table(results: list[EpisodeResult]) -> Table:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for r in results:
        if r.error:
            counts[(r.tags.get("task", ""), r.error.split("\n")[0][:80])] += 1
    rows = [[t, reason, n] for (t, reason), n in sorted(counts.items(), key=lambda kv: -kv[1])[:15]]
    return Table(title="CallNavi failure reasons (top 15)", columns=["Task", "Reason", "Episodes"], rows=rows)
