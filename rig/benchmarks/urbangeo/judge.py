"""The LLM judge: per-task rubrics (our wording, the paper's point allocations, appendix C.2 Figures 9-17), the
judge prompt, a strict verdict parser, and the judge engine's lifecycle.

Point totals: 25 for the foundational tasks (reasoning 15 + answer 10), 30 for the advanced ones (20 + 10). The
judge always returns both parts; for Distance, Direction, Relation, Planning and Prediction the program's answer
score is used (the hybrid framework) and the judge's is kept beside it (the paper's "pure judge" comparison,
appendix F.1). A verdict that does not parse is recorded as such (status and raw text), never read as 0.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path

from rig.decoding.constraint import Constraint
from rig.decoding.safe import MAX_CHARS
from rig.engines.base import Engine
from rig.records import ChatRequest, Generation, Message, Sampling

REASON_MAX = {"DS": 15, "DR": 15, "RE": 15, "PN": 20, "PR": 20, "NV": 20, "RC": 20}
ANSWER_MAX = 10

# (criterion, points, what earns them) - reasoning part; the answer part follows each list.
RUBRICS: dict[str, tuple[list[tuple[str, int, str]], str]] = {
    "DS": (
        [
            ("Coordinates", 2, "both points' latitude and longitude restated correctly in decimal degrees"),
            ("Radians", 3, "every coordinate converted to radians correctly, with the values shown"),
            ("Differences", 3, "latitude and longitude differences computed correctly, with the values shown"),
            (
                "Haversine",
                5,
                "the haversine terms (a, then the central angle c) computed correctly; partial credit for "
                "small arithmetic slips or for the formula without numbers",
            ),
            ("Presentation", 2, "reasoning and answer in their own sections, steps easy to follow"),
        ],
        "Answer (10): max(0, 10 - |answer km - reference km|), two decimals.",
    ),
    "DR": (
        [
            ("Coordinates", 2, "both points' latitude and longitude restated correctly in decimal degrees"),
            ("Radians", 3, "coordinates converted to radians correctly, with the values shown"),
            ("Longitude difference", 3, "the longitude difference computed correctly"),
            (
                "Bearing formula",
                5,
                "the forward-azimuth formula (atan2 of the two terms) applied and evaluated correctly, "
                "normalised to 0-360 degrees; partial credit for small slips",
            ),
            ("Presentation", 2, "reasoning and answer in their own sections, steps easy to follow"),
        ],
        "Answer (10): max(0, 10 - 0.25 x |answer bearing - reference bearing|), minus 2 when the named direction "
        "does not match the answer's own bearing.",
    ),
    "RE": (
        [
            ("Coordinates", 1, "the coordinates of both features restated correctly"),
            ("Criteria", 3, "clear criteria that separate the possible relations (crossing, distance, inside/outside)"),
            (
                "Spatial analysis",
                8,
                "the relation worked out from the coordinates with a geometric method (segment "
                "crossing tests, point-in-polygon, distances, directions); 3-7 for a mostly right "
                "analysis with slips or without computations, 0-2 for a wrong one",
            ),
            ("Presentation", 3, "reasoning and answer in their own sections, logically ordered"),
        ],
        "Answer (10): 10 when the relation term equals the reference, else 0.",
    ),
    "PN": (
        [
            ("Data", 2, "bearings and distances between consecutive locations read and organised correctly"),
            ("Far location", 3, "identifies which location lies farthest from the start and uses it to prune orders"),
            ("Positions", 5, "bearings and distances turned into x/y positions correctly"),
            (
                "Order evaluation",
                8,
                "the candidate orders (a sensibly reduced set) compared by total distance and the "
                "shortest found; 4-6 with small mistakes or needless orders, 0-3 if incomplete",
            ),
            ("Presentation", 2, "reasoning and answer in their own sections, logically ordered"),
        ],
        "Answer (10): 10 minus 2 for every position where the answer's order differs from the reference order.",
    ),
    "PR": (
        [
            ("Trajectory", 5, "the sequence of positions followed and the direction of travel described correctly"),
            ("Coordinates", 4, "coordinates used correctly to relate the places to each other"),
            ("Candidates", 5, "every candidate examined against the trajectory"),
            ("Distances", 3, "distances from the last position to the candidates assessed correctly"),
            ("Logic", 3, "a sound conclusion drawn from direction and distance"),
        ],
        "Answer (10): 10 when the chosen destination is the reference, else 0.",
    ),
    "NV": (
        [
            ("Network", 5, "how the segments connect (shared end points) understood correctly"),
            ("Routes", 5, "the possible routes from start to destination found, with no invented connections"),
            ("Distances", 6, "route lengths computed correctly from the coordinates"),
            ("Route choice", 2, "the shortest route chosen (1 for a valid but longer route)"),
            ("Presentation", 2, "clear, ordered reasoning"),
        ],
        "Answer (10): route correctness 5 (5 the shortest route, 2 a valid longer route, 0 an impossible one); "
        "completeness 4 (4 every segment in the right order, 1 small omissions, 0 major ones); clarity 1 (1 when a "
        "person could follow the directions).",
    ),
    "RC": (
        [
            ("User location", 4, "the user's position and request understood (2 for small slips)"),
            ("Proximity", 5, "distances from the user to each option computed correctly"),
            (
                "Constraints",
                6,
                "every constraint checked for every option: distance limit, kind of place, opening "
                "hours at the given time",
            ),
            ("Decision", 3, "a clear way of weighing the options that meet the constraints"),
            ("Presentation", 2, "clear, ordered reasoning"),
        ],
        "Answer (10): 10 for the reference place; 3-5 for a place that meets most constraints but is not the best; "
        "0 for a place that breaks a key constraint.",
    ),
}


def rubric_text(task: str) -> str:
    items, answer = RUBRICS[task]
    lines = [f"Reasoning (max {REASON_MAX[task]}):"]
    lines += [f"- {name} ({pts}): {what}" for name, pts, what in items]
    lines.append(answer)
    return "\n".join(lines)


JUDGE_SYSTEM = (
    "You grade answers to city geography reasoning questions, impartially and strictly. The graded "
    "response has a <reason> part (the working) and an <answer> part (the final answer)."
)


def judge_messages(task: str, question: str, response: str, reference: str, verdict_only: bool) -> list[Message]:
    rmax = REASON_MAX[task]
    fmt = f"reason:[[R]], answer:[[A]] with R a number from 0 to {rmax} and A a number from 0 to {ANSWER_MAX}"
    how = (
        f"Reply with only the scores, in exactly this format: {fmt}."
        if verdict_only
        else f"Briefly explain how the reasoning meets each rubric item and how the answer compares with the "
        f"reference, then end with one line in exactly this format: {fmt}."
    )
    body = (
        f"Question:\n{question}\n\nResponse to grade:\n{response}\n\nReference answer:\n{reference}\n\n"
        f"Rubric:\n{rubric_text(task)}\n\n{how}"
    )
    return [Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content=body)]


# ---- verdict parsing -------------------------------------------------------------------------------------------------

_VERDICT = re.compile(
    r"reason\s*:\s*\[\[([^\[\]]*)\]\]\s*,\s*answer\s*:\s*\[\[([^\[\]]*)\]\]"
    r"(?:\s*,\s*total\s*:\s*\[\[([^\[\]]*)\]\])?",
    re.I,
)
_NUM = re.compile(r"\s*(\d+(?:\.\d+)?)\s*")


@dataclass
class Verdict:
    status: str  # ok | missing | malformed | ambiguous | out_of_range | inconsistent_total | error
    reason: float | None = None
    answer: float | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def parse_verdict(text: str, reason_max: float, answer_max: float = ANSWER_MAX) -> Verdict:
    """``reason:[[x]], answer:[[y]]`` (optionally ``, total:[[z]]`` with z = x + y), case and spaces aside.

    Strict: numbers only inside the brackets, within 0..max; several verdicts must agree; anything else is an
    unparsed verdict with a status saying why."""
    text = (text or "")[:MAX_CHARS]
    found = _VERDICT.findall(text)
    if not found:
        if re.search(r"reason\s*+:?\s*+\*{0,2}\s*+\[\[", text or "", re.I):  # possessive: linear
            return Verdict("malformed", detail="a verdict is there but not as reason:[[x]], answer:[[y]]")
        return Verdict("missing", detail="no reason:[[x]], answer:[[y]] line")
    if len({(r.strip(), a.strip()) for r, a, _ in found}) > 1:
        return Verdict("ambiguous", detail=f"{len(found)} different verdicts")
    r, a, total = found[-1]
    mr, ma = _NUM.fullmatch(r), _NUM.fullmatch(a)
    if not (mr and ma):
        return Verdict("malformed", detail=f"not numbers: [[{r}]], [[{a}]]")
    rv, av = float(mr.group(1)), float(ma.group(1))
    if not (0 <= rv <= reason_max and 0 <= av <= answer_max):
        return Verdict("out_of_range", detail=f"reason {rv} of {reason_max}, answer {av} of {answer_max}")
    if total:
        mt = _NUM.fullmatch(total)
        if not mt or abs(float(mt.group(1)) - (rv + av)) > 0.011:
            return Verdict("inconsistent_total", detail=f"total [[{total}]] is not {rv} + {av}")
    return Verdict("ok", rv, av)


def _num_regex(mx: int) -> str:
    """0..mx with up to two decimals, as a regex the grammar translator accepts (no lookaround)."""
    if not 1 <= mx <= 20:
        raise ValueError(f"score maximum {mx} outside 1..20")
    below = f"[0-{mx - 1}]" if mx <= 10 else f"[0-9]|1[0-{mx - 11}]"
    return rf"(({below})(\.[0-9]{{1,2}})?|{mx}(\.0{{1,2}})?)"


def verdict_regex(reason_max: int, answer_max: int = ANSWER_MAX) -> str:
    return rf"reason:\[\[{_num_regex(reason_max)}\]\], answer:\[\[{_num_regex(answer_max)}\]\]"


# ---- the judge engine ---------------------------------------------------------------------------------------------


class JudgeConfigError(ValueError):
    pass


class Judge:
    """The judge model: the candidate's own engine (default), or another models.yaml entry loaded once, on first
    use, and closed by ``aclose`` (the benchmark's ``teardown``, which the runner awaits after the last episode)."""

    def __init__(
        self,
        name: str | None,
        temperature: float,
        max_tokens: int,
        decode: str,
        models_file: Path | None = None,
        gpu: int | None = None,
    ) -> None:
        if decode not in ("none", "verdict"):
            raise JudgeConfigError(f"judge_decode: {decode!r} is not none or verdict")
        self.name, self.temperature, self.max_tokens, self.decode = name, temperature, max_tokens, decode
        self.models_file, self.gpu = models_file, gpu
        self._engine: Engine | None = None
        self._locks: dict[int, asyncio.Lock] = {}
        self._spec = None
        if name is not None:
            from rig.registry import RegistryError, load_registry

            try:
                reg = load_registry(models_file)
                self._spec = reg.get(name)
                self._registry_path = reg.path
            except (RegistryError, OSError, ValueError) as exc:
                raise JudgeConfigError(f"judge={name}: {exc}") from None
            self.name = self._spec.name  # a base name resolves to its default variant, as --model does

    def model_name(self, candidate: Engine) -> str:
        return self.name or candidate.spec.name

    def _lock(self) -> asyncio.Lock:
        key = id(asyncio.get_running_loop())  # a lock belongs to one event loop; tests run several
        if key not in self._locks:
            self._locks[key] = asyncio.Lock()
        return self._locks[key]

    async def engine(self, candidate: Engine) -> Engine:
        if self.name is None or self.name == candidate.spec.name:  # the candidate judges itself: no second load
            return candidate
        async with self._lock():
            if self._engine is None:
                from rig.engines import create_engine
                from rig.registry import resolve_weights

                weights = resolve_weights(self._spec, self._registry_path)  # type: ignore[arg-type]
                eng = create_engine(self._spec, weights, gpu=self.gpu)  # type: ignore[arg-type]
                await eng.load()
                self._engine = eng
        return self._engine

    async def grade(
        self, candidate: Engine, task: str, question: str, response: str, reference: str, seed: int
    ) -> tuple[Verdict, Generation | None]:
        try:
            eng = await self.engine(candidate)
        except Exception as exc:  # a judge that cannot load is a recorded judge error on every episode
            return Verdict("error", detail=f"judge engine: {type(exc).__name__}: {exc}"), None
        verdict_only = self.decode == "verdict"
        constraint = Constraint(kind="regex", pattern=verdict_regex(REASON_MAX[task])) if verdict_only else None
        req = ChatRequest(
            messages=judge_messages(task, question, response, reference, verdict_only),
            constraint=constraint,
            sampling=Sampling(temperature=self.temperature, max_tokens=self.max_tokens, seed=seed),
        )
        gen = await eng.chat(req)
        if gen.error:
            return Verdict("error", detail=f"judge generation: {gen.error}"), gen
        return parse_verdict(gen.text, REASON_MAX[task]), gen

    async def aclose(self) -> None:
        if self._engine is not None:
            eng, self._engine = self._engine, None
            await eng.close()
