"""Reading answer text: normalised words, stated distances / durations / clock times, coordinates written as
"lon,lat", fenced JSON blocks, and Python-literal cells cut at a spreadsheet's cell limit. Each reader of model
text reads its first ``MAX_CHARS`` characters only, in linear time."""

from __future__ import annotations

import ast
import math
import re
import unicodedata
import warnings
from collections.abc import Iterable
from typing import Any

from rig.benchmarks.mobilitybench.lexicon import Lexicon
from rig.decoding.safe import MAX_CHARS, blocks, load_json


def norm(text: Any) -> str:
    t = unicodedata.normalize("NFKC", str(text)[:MAX_CHARS]).casefold()
    t = re.sub(r"[\s\-_/,.;:!?'\"()\[\]{}]+", " ", t).strip()
    return re.sub(r"^(the|a|an) ", "", t)


def has_word(text: str, word: str) -> bool:
    return word.lower() in text.lower()


def count_words(text: str, words: Iterable[str]) -> int:
    return sum(1 for w in words if has_word(text, w))


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371.0 * math.asin(min(1.0, math.sqrt(h)))


COORD_RX = re.compile(r"(\d{2,3}\.\d+),\s*(\d{1,2}\.\d+)")


def coords_in(text: str, lex: Lexicon) -> list[tuple[float, float]]:
    """(lon, lat) pairs written as "lon,lat" in text, inside the lexicon's plausible range."""
    text = (text or "")[:MAX_CHARS]
    out = []
    for a, b in COORD_RX.findall(text or ""):
        lon, lat = float(a), float(b)
        if lex.lon_range[0] <= lon <= lex.lon_range[1] and lex.lat_range[0] <= lat <= lex.lat_range[1]:
            out.append((lon, lat))
    return out


def fenced_json(answer: str) -> dict[str, Any] | None:
    """The object in the first closed ```json fence (bounded loader; linear search)."""
    answer = (answer or "")[:MAX_CHARS]
    found = [(a, b) for a, b, closed in blocks(answer or "", "```json", "```", fold=True) if closed]
    if not found:
        return None
    v, _ = load_json(answer[found[0][0] : found[0][1]].strip())
    return v if isinstance(v, dict) else None


def sanitize_literal(text: str) -> str:
    return text.replace("<ToolStatus.SUCCESS: 0>", "'SUCCESS'").replace("<ToolStatus.FAILED: 1>", "'FAILED'")


# Python's parser refuses brackets nested deeper than this, so no prefix reaching past it can parse.
_PARSER_DEPTH = 200
# A cell cut at the spreadsheet limit parses within a few steps back; a corrupt one would cost a full parse per step.
MAX_REPAIR_STEPS = 256
# Spreadsheets cut cells at 32,767 characters; longer text was not cut by one, so only the plain parse applies (each
# step back re-parses the prefix: 256 steps over a 140,000-character cell took seconds).
MAX_REPAIR_CHARS = 40_000


def _prefix_states(s: str) -> list[tuple[str | None, Any]]:
    """The scan state after each prefix ``s[:i]``: the open quote and the open brackets, as a linked stack
    ``(bracket, rest)`` shared between prefixes, so every cut is closed without rescanning the text (linear, not
    quadratic). Stops where the brackets nest deeper than the parser reads."""
    quote: str | None = None
    esc = False
    stack: Any = None
    depth = 0
    states = [(quote, stack)]
    for ch in s:
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            stack, depth = (ch, stack), depth + 1
            if depth > _PARSER_DEPTH:
                break
        elif ch in ")]}" and stack is not None:
            stack, depth = stack[1], depth - 1
        states.append((quote, stack))
    return states


def repair_literal(text: Any) -> Any:
    """Parse a Python-literal cell, repairing one cut at the spreadsheet cell limit: drop trailing separators,
    close an open quote, close open brackets in stack order. None when nothing parses."""
    if not isinstance(text, str):
        return text
    with warnings.catch_warnings():  # the parser's SyntaxWarnings on damaged text ("invalid decimal literal")
        warnings.simplefilter("ignore", SyntaxWarning)
        return _repair_literal(text)


def _repair_literal(text: str) -> Any:
    s = sanitize_literal(text)
    try:
        return ast.literal_eval(s)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # TypeError: `{{}}`, a dict in a set
        pass
    if len(s) > MAX_REPAIR_CHARS or s.lstrip()[:1] not in ("{", "[", "(", "'", '"'):
        return None  # too long to be a cut cell, or not a container or string literal that a cut left open
    states = _prefix_states(s)
    end = len(states) - 1  # the prefixes past a too-deep bracket are never tried
    for _ in range(MAX_REPAIR_STEPS):
        if end <= 0:
            break
        cand = s[:end].rstrip().rstrip(",:+-").rstrip()
        quote, stack = states[len(cand)]
        closers = []
        while stack is not None:
            closers.append({"(": ")", "[": "]", "{": "}"}[stack[0]])
            stack = stack[1]
        try:
            return ast.literal_eval(cand + (quote or "") + "".join(closers))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            # Step back to the previous separator rather than one character at a time.
            cut = max(cand.rfind(","), cand.rfind(":"), cand.rfind("{"), cand.rfind("["))
            end = cut if 0 < cut < end else end - 1
    return None


# (?<!...): a match failing inside a long digit run is not retried from each of its digits (quadratic)
_DIST_RX = re.compile(
    r"(?<![\d.,])(\d+(?:[.,]\d+)?)\s*(km|kilomet(?:er|re)s?|公里|千米|m\b|met(?:er|re)s?|米)", re.IGNORECASE
)
_HOUR_RX = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:h\b|hours?|hrs?|小时)", re.IGNORECASE)
_MIN_RX = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:min\b|mins\b|minutes?|分钟)", re.IGNORECASE)
_CLOCK_RX = re.compile(r"\b(\d{1,2})[:.](\d{2})\s*(am|pm|a\.m\.|p\.m\.)?", re.IGNORECASE)


def stated_distances_m(text: str) -> list[float]:
    """Every distance the text states, in metres."""
    text = (text or "")[:MAX_CHARS]
    vals = []
    for num, unit in _DIST_RX.findall(text or ""):
        v = float(num.replace(",", "."))
        if not math.isfinite(v):
            continue
        u = unit.lower()
        vals.append(v * 1000 if u in ("km", "公里", "千米") or u.startswith("kilomet") else v)
    return vals


def stated_durations_s(text: str) -> list[float]:
    """Every duration the text states: minutes alone, hours alone, and "H hours M minutes" combined."""
    t = (text or "")[:MAX_CHARS]
    mins = [(m.start(), v) for m in _MIN_RX.finditer(t) if math.isfinite(v := float(m.group(1)))]
    hours = [(m.end(), v) for m in _HOUR_RX.finditer(t) if math.isfinite(v := float(m.group(1)))]
    out = [v * 60 for _, v in mins] + [v * 3600 for _, v in hours]
    for end, h in hours:
        nxt = [v for start, v in mins if 0 <= start - end <= 8]
        if nxt:
            out.append(h * 3600 + nxt[0] * 60)
    return out


def stated_clocks_min(text: str) -> list[int]:
    text = (text or "")[:MAX_CHARS]
    out = []
    for h, m, ampm in _CLOCK_RX.findall(text or ""):
        hh, mm = int(h), int(m)
        if ampm and ampm.lower().startswith("p") and hh < 12:
            hh += 12
        if ampm and ampm.lower().startswith("a") and hh == 12:
            hh = 0
        if hh < 24 and mm < 60:
            out.append(hh * 60 + mm)
    return out


# Road status words. English words match at a word start ("jam" in "jammed", never "clear" in "unclear"), and
# "clear" as a whole word only ("clearly jammed" states no clear road).
TRAFFIC_WORDS: dict[str, tuple[str, ...]] = {
    "congested": ("严重拥堵", "拥堵", "拥挤", "堵塞", "congest", "jam", "blocked", "heavy traffic"),
    "slow": ("缓行", "slow"),
    "clear": ("畅通", "顺畅", "free-flowing", "free flowing", "flowing freely", "clear", "smooth"),
}
_AMAP_STATUS = {"1": "clear", "2": "slow", "3": "congested", "4": "congested"}  # AMap traffic status codes


def _word_rx(word: str) -> str:
    if not word.isascii():
        return re.escape(word)
    return r"\b" + re.escape(word) + (r"\b" if word == "clear" else "")


_TRAFFIC_RX = re.compile(
    "|".join(f"(?P<{s}{i}>{_word_rx(w)})" for s, words in TRAFFIC_WORDS.items() for i, w in enumerate(words))
)
# A negation just before a status word turns it round: "不拥堵", "没有出现拥堵", "no jams", "not heavily congested".
# Chinese negators stand right before the word (an adverb or verb between at most); English ones up to two words
# before, within the clause ("No, it's jammed" is jammed).
_ZH_NEGATED = re.compile(r"(?:不|没有|没|无|未)(?:太|很|是很|是|算|会|怎么|那么|出现|发生|明显|再)?$")
_EN_NEGATED = re.compile(r"(?:\b(?:not|no|without|free of|never|nor)|n't)(?:[\s-]+\w+){0,2}?[\s-]+$")


def stated_traffic(text: str) -> set[str]:
    """The road statuses an answer states (clear, slow, congested), reading negations: a negated jam or slowdown
    ("不拥堵", "no congestion") states a clear road, a negated clear one ("不畅通", "not clear") a slow or jammed
    one."""
    t = (text or "")[:MAX_CHARS].lower()
    out: set[str] = set()
    for m in _TRAFFIC_RX.finditer(t):
        status = (m.lastgroup or "").rstrip("0123456789")
        before = t[max(0, m.start() - 40) : m.start()]
        if _ZH_NEGATED.search(before) or _EN_NEGATED.search(before):
            out |= {"slow", "congested"} if status == "clear" else {"clear"}
        else:
            out.add(status)
    return out


def traffic_truth(ans: Any) -> str | None:
    """The status of an AMap-shaped traffic answer ({'trafficinfo': {'description', 'evaluation': {'status',
    'expedite', 'congested', 'blocked'}}}): the evaluation's status code, else the description's words, else the
    largest of the percentages. None when the answer says nothing usable."""
    info = ans.get("trafficinfo") if isinstance(ans, dict) else None
    if not isinstance(info, dict):
        return None
    raw = info.get("evaluation")
    ev: dict[str, Any] = raw if isinstance(raw, dict) else {}
    code = str(ev.get("status") or "").strip()
    if code in _AMAP_STATUS:
        return _AMAP_STATUS[code]
    said = stated_traffic(str(info.get("description") or ""))
    if len(said) == 1:
        return said.pop()

    def pct(key: str) -> float:
        try:
            return float(str(ev.get(key) or "0").rstrip("%"))
        except ValueError:
            return 0.0

    shares = {"clear": pct("expedite"), "slow": pct("congested"), "congested": pct("blocked")}
    best = max(shares, key=lambda k: shares[k])
    return best if shares[best] > 0 else None
