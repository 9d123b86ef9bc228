"""Reading model replies and scoring the parts whose truth is deterministic (paper sec. 4 and appendix C).

Knowledge: the option letter. Reasoning: the <reason>/<answer> sections; the answer scored by program for
Distance (absolute-error penalty), Direction (bearing penalty, -2 when the named direction contradicts the model's
own bearing), Relation and Prediction (exact match) and Planning (10 minus 2 per misplaced stop). Navigation and
Recommendation answers are natural language; the judge scores them (judge.py). Each scorer returns the score and
what it read, so a report can show why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rig.benchmarks.urbangeo import geometry as G
from rig.decoding.safe import MAX_CHARS, ascii_lower, blocks
from rig.maps.text import normalise_name

ANSWER_MAX = 10.0


# ---- knowledge --------------------------------------------------------------------------------------------------


def parse_letter(text: str, letters: str, options: list[str] | None = None) -> str | None:
    """The option letter of a multiple-choice reply, or None.

    Accepted: the letter alone ("B", "(B)", "B."), the letter opening the reply followed by punctuation
    ("B. Kiasma", "B) ..."), "answer is B" / "answer: B", or (failing those) the full text of exactly one option.
    A bare letter followed by words ("A good choice is C") is not read as "A"."""
    t = text[:MAX_CHARS].strip()  # a reply past any max_tokens is read only that far
    cls = f"[{letters}]"
    m = re.fullmatch(rf"[\(\[]?({cls})[\)\]\.:]?", t)
    if m:
        return m.group(1)
    m = re.match(rf"[\(\[]?({cls})(?:[\)\]\.:]|\s*$)", t)
    if m:
        return m.group(1)
    # possessive quantifiers: "answer" and a long run of spaces is one pass, not a retry per split of the run
    m = re.search(rf"\banswer\b(?:\s++is)?\s*+[:\-]?\s*+(?:option\s++)?[\(\[]?({cls})\b", t, re.I)
    if m:
        return m.group(1)
    if options:
        low = normalise_name(t)
        hits = [i for i, o in enumerate(options) if normalise_name(o) in low]
        if len(hits) == 1:
            return letters[hits[0]]
    return None


# ---- reasoning sections ------------------------------------------------------------------------------------------


@dataclass
class Sections:
    reason: str | None
    answer: str | None
    status: str  # ok | unclosed (cut off inside <answer>) | missing (no <answer>)


def sections(text: str) -> Sections:
    text = text[:MAX_CHARS]
    reasons = [text[a:b] for a, b, closed in blocks(text, "<reason>", "</reason>", fold=True) if closed]
    answers = [text[a:b] for a, b, closed in blocks(text, "<answer>", "</answer>", fold=True) if closed]
    reason = reasons[-1].strip() if reasons else None
    if answers:
        return Sections(reason, answers[-1].strip(), "ok")
    i = ascii_lower(text).rfind("<answer>")
    if i >= 0:
        return Sections(reason, text[i + len("<answer>") :].strip(), "unclosed")
    return Sections(reason, None, "missing")


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _numbers(text: str, unit: re.Pattern[str] | None = None) -> Iterator[tuple[float, re.Match[str] | None]]:
    """Each finite number in ``text`` and the ``unit`` match right after it. One left-to-right pass (a search for
    number-then-unit from every position is quadratic on a long digit run); a number too long to be finite is
    skipped, not read as infinity."""
    for m in _NUMBER.finditer(text):
        v = float(m.group())
        if math.isfinite(v):
            yield v, unit.match(text, m.end()) if unit else None


# ---- Distance ------------------------------------------------------------------------------------------------------


_KM_UNIT = re.compile(r"\s*+(km|kilomet(?:er|re)s?|m|met(?:er|re)s?)\b", re.I)
_DEG_UNIT = re.compile(r"\s*+(?:°|deg)", re.I)


def parse_km(answer: str) -> float | None:
    """The first number with a distance unit (metres converted), else the first number."""
    first = None
    for v, unit in _numbers(answer.replace(",", ""), _KM_UNIT):
        if unit:
            return v / 1000.0 if unit.group(1).lower().startswith("m") else v
        first = v if first is None else first
    return first


def score_distance(answer: str | None, truth_km: float) -> tuple[float, dict[str, Any]]:
    """Figure 9: max(0, 10 - |answer - truth|) in km, rounded to 2 decimals."""
    v = parse_km(answer) if answer else None
    if v is None:
        return 0.0, {"km": None}
    return round(max(0.0, ANSWER_MAX - abs(v - truth_km)), 2), {"km": v, "abs_error_km": abs(v - truth_km)}


# ---- Direction -----------------------------------------------------------------------------------------------------

_DIR_WORDS = {re.sub(r"[\s\-]", "", n.lower()): n for n in G.CARDINAL_16}
_DIR_RE = re.compile(r"\b(" + "|".join(sorted(_DIR_WORDS, key=len, reverse=True)) + r")\b")
_ABBR_RE = re.compile(r"\b(" + "|".join(a for a in sorted(G.ABBREV_16, key=len, reverse=True) if len(a) > 1) + r")\b")


def parse_cardinal(answer: str) -> str | None:
    """The compass direction named in an answer (16-point names, hyphenated or not, or 2-3 letter abbreviations);
    the one after "direction" when several are named, else the last one."""
    text = answer
    k = text.lower().rfind("direction")
    tail = text[k:] if k >= 0 else text
    for part in (tail, text):
        low = re.sub(r"(north|south)[\s\-]+(east|west)", r"\1\2", part.lower())
        low = re.sub(r"(east|west|north|south)-(north|south|east|west)", r"\1\2", low)
        found = [_DIR_WORDS[m.group(1)] for m in _DIR_RE.finditer(low)]
        found += [G.CARDINAL_16[G.ABBREV_16.index(m.group(1))] for m in _ABBR_RE.finditer(part)]
        if found:
            return found[0] if part is tail and k >= 0 else found[-1]
    return None


def parse_bearing(answer: str) -> float | None:
    """The number after "bearing", else the first number in degrees, else the first number (finite only)."""
    m = re.search(r"bearing[^0-9\-]{0,30}(-?\d+(?:\.\d+)?)", answer, re.I)
    if m and math.isfinite(float(m.group(1))):
        return float(m.group(1))
    first = None
    for v, unit in _numbers(answer, _DEG_UNIT):
        if unit:
            return v
        first = v if first is None else first
    return first


def score_direction(answer: str | None, truth_bearing: float) -> tuple[float, dict[str, Any]]:
    """Figure 10: max(0, 10 - 0.25 x |error in degrees|), minus 2 when the named direction does not match the
    model's own bearing; floored at 0, 2 decimals. The error is the angular difference (359 vs 1 is 2 degrees
    off), which the paper's |a - b| leaves open; a missing direction name counts as not matching."""
    b = parse_bearing(answer) if answer else None
    if b is None:
        return 0.0, {"bearing": None, "cardinal": None}
    card = parse_cardinal(answer or "")
    own = G.cardinal8(b) if card in G.CARDINAL_8 else G.cardinal16(b)
    consistent = card is not None and card == own
    err = G.angle_diff(b % 360.0, truth_bearing)
    score = max(0.0, ANSWER_MAX - 0.25 * err) - (0.0 if consistent else 2.0)
    return round(max(0.0, score), 2), {"bearing": b, "cardinal": card, "consistent": consistent, "error_deg": err}


# ---- Relation --------------------------------------------------------------------------------------------------------

_LABEL_PATTERNS = {
    "Intersecting": r"intersect\w*",
    "Parallel": r"parallel",
    "Disconnected": r"disconnect\w*",
    "Pass through": r"pass(?:es|ing)?\s+through",
    "Touch": r"touch\w*",
    "Lie outside": r"(?:lies?\s+|lying\s+)?outside",
    "Overlapping": r"overlap\w*",
    "Adjacent": r"adjacent",
    "Separate": r"separat\w*",
}


def parse_relation(answer: str, labels: list[str]) -> str | None:
    """The relation term of an answer: the whole answer when it is one term, else the last term it mentions."""
    low = answer.lower()
    best, pos = None, -1
    for lab in labels:
        for m in re.finditer(r"\b" + _LABEL_PATTERNS[lab] + r"\b", low):
            if m.start() > pos:
                best, pos = lab, m.start()
    return best


def score_exact(pred: str | None, truth: str) -> float:
    return ANSWER_MAX if pred is not None and pred == truth else 0.0


# ---- Planning -----------------------------------------------------------------------------------------------------


def mentions_in_order(text: str, names: list[str]) -> list[str]:
    """The names a text mentions, in order of first mention; longer names are found first so that "Kiasma" inside
    "Kiasma Theatre" is not counted twice."""
    low = normalise_name(text)
    found: list[tuple[int, str]] = []
    for n in sorted(names, key=len, reverse=True):
        k = low.find(normalise_name(n))
        if k >= 0:
            found.append((k, n))
            low = low[:k] + "\0" * len(normalise_name(n)) + low[k + len(normalise_name(n)) :]
    return [n for _, n in sorted(found)]


def score_order(answer: str | None, names: list[str], truth: list[str]) -> tuple[float, dict[str, Any]]:
    """Figure 14: 10 minus 2 points per position of the optimal order the answer does not hold (Hamming),
    floored at 0. The start counts as a position, as in the paper's worked example (two swapped stops: 6/10)."""
    seq = mentions_in_order(answer, names) if answer else []
    miss = G.hamming(seq, truth)
    return max(0.0, ANSWER_MAX - 2.0 * miss), {"order": seq, "misplaced": miss}


# ---- Prediction and Recommendation: one named candidate -----------------------------------------------------------


def parse_candidate(answer: str, candidates: list[str], letters: str = "ABCDE") -> str | None:
    """The one candidate an answer names (by name, or by its letter alone); None when none or several."""
    named = mentions_in_order(answer, candidates)
    if len(named) == 1:
        return named[0]
    if not named:
        m = re.fullmatch(rf"\s*[\(\[]?([{letters[: len(candidates)]}])[\)\]\.:]?\s*", answer) or re.match(
            rf"\s*([{letters[: len(candidates)]}])[\.\)]\s", answer
        )
        if m:
            return candidates[letters.index(m.group(1))]
    return None


def route_in_order(answer: str | None, streets: list[str]) -> float:
    """Navigation diagnostic (not the paper's answer score): 1 when the answer names the optimal route's streets
    in order (other streets may be mentioned between them)."""
    if not answer:
        return 0.0
    low, at = normalise_name(answer), 0
    for s in streets:
        k = low.find(normalise_name(s), at)
        if k < 0:
            return 0.0
        at = k + len(normalise_name(s))
    return 1.0


def program_answer(
    task: str, answer: str | None, truth: dict[str, Any], facts: dict[str, Any]
) -> tuple[float | None, dict[str, Any]]:
    """The programmatic answer score of a task (None for the judge-scored tasks) and what was read."""
    answer = answer[:MAX_CHARS] if answer else answer
    if task == "DS":
        return score_distance(answer, truth["km"])
    if task == "DR":
        return score_direction(answer, truth["bearing"])
    if task == "RE":
        pred = parse_relation(answer, truth["labels"]) if answer else None
        return score_exact(pred, truth["label"]), {"relation": pred}
    if task == "PN":
        return score_order(answer, facts["names"], truth["order"])
    if task == "PR":
        pred = parse_candidate(answer, truth["candidates"]) if answer else None
        return score_exact(pred, truth["destination"]), {"destination": pred}
    if task == "NV":
        return None, {"route_in_order": route_in_order(answer, truth["streets"])}
    if task == "RC":
        pred = parse_candidate(answer, truth["candidates"]) if answer else None
        return None, {"poi": pred, "poi_match": float(pred == truth["poi"])}
    raise KeyError(task)
