"""UrbanGeoEval's gold and anti-gold agents for `rig selftest`.

Knowledge: the gold option letter, or another one. Reasoning: a reply with its <reason> and <answer> sections whose
answer is the reference answer text the generator wrote (so the programmatic scorers must read the generator's own
wording back), or a wrong answer in the same words. The judge's requests go to the same scripted agent, which plays a
perfect judge (full reasoning and answer points for the gold reply, none for the anti-gold one): what the self-test
checks there is the judge prompt's round trip, the verdict parser (and the verdict grammar under
``judge_decode=verdict``) and the arithmetic of the totals, not a judge model's grading.
"""

from __future__ import annotations

from typing import Any

from rig.agents.scripted import Answer, Player
from rig.benchmarks.base import MetricRole
from rig.benchmarks.urbangeo.judge import ANSWER_MAX, JUDGE_SYSTEM, REASON_MAX
from rig.records import ChatRequest, Episode


def player(episode: Episode, right: bool) -> Player:
    gt = episode.ground_truth
    if episode.tags.get("module") == "knowledge":
        letters = gt["letters"]
        letter = gt["answer"] if right else next(x for x in letters if x != gt["answer"])
        answer = Answer(letter, "text")
        return lambda _request: answer
    task = gt["task"]
    text = gt["truth_text"] if right else _wrong(task, gt["truth"], gt["facts"])
    reply = Answer(f"<reason>Worked out from the data given.</reason>\n<answer>{text}</answer>", "text")
    verdict = (
        Answer(f"reason:[[{REASON_MAX[task]}]], answer:[[{ANSWER_MAX}]]", "text")
        if right
        else Answer("reason:[[0]], answer:[[0]]", "text")
    )

    def play(request: ChatRequest) -> Answer:
        first = request.messages[0] if request.messages else None
        judging = first is not None and first.role == "system" and first.content == JUDGE_SYSTEM
        return verdict if judging else reply

    return play


def _wrong(task: str, truth: dict[str, Any], facts: dict[str, Any]) -> str:
    """A wrong answer written the way the reference answer is."""
    if task == "DS":
        return f"{truth['km'] + 50:.3f} km"
    if task == "DR":
        from rig.benchmarks.urbangeo import geometry as G

        b = (truth["bearing"] + 180.0) % 360.0
        return f"Bearing: {b:.2f} degrees, Cardinal direction: {G.cardinal8(b)}"
    if task == "RE":
        return next(label for label in truth["labels"] if label != truth["label"])
    if task == "PN":  # every position moved, the start too: the fewest points the metric gives
        order = truth["order"]
        return ", ".join([*order[1:], order[0]])
    if task == "PR":
        return next(c for c in truth["candidates"] if c != truth["destination"])
    if task == "RC":
        return next(c for c in truth["candidates"] if c != truth["poi"])
    return "Turn around and walk the other way."  # NV: its answer is the judge's


def metrics(options: Any) -> dict[str, MetricRole]:
    out: dict[str, MetricRole] = {}
    if "knowledge" in options.modules:
        out.update(correct="score", parsed="form")
    if "reasoning" in options.modules:
        out.update(answer_section="form", judge_parsed="form", answer_program="score", answer="score")
        out.update(answer_judge="score", total_pct="score")
    return out


# The planning answer is 10 minus 2 points per misplaced position: a wrong order of k < 5 places keeps 10 - 2k.
CAPS = {
    m: "anti-gold: PN's answer score is 10 - 2 per misplaced position, so a wrong order of k < 5 places keeps "
    "10 - 2k points (the paper's Figure 14)"
    for m in ("answer_program", "answer", "total_pct")
}
MAXIMA = {"answer_program": float(ANSWER_MAX), "answer": float(ANSWER_MAX), "answer_judge": float(ANSWER_MAX)}
MAXIMA["total_pct"] = 100.0
