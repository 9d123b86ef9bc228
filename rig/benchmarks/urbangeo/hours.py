"""A small reader for the common forms of OSM ``opening_hours``, enough to decide "open at <day> <time>".

Understood: ``24/7``; rules separated by ``;`` (or ``,`` before a new day list); day lists and ranges
(``Mo-Fr``, ``Mo,We``, ``Sa-Su``, wrapping ``Fr-Mo``); times ``HH:MM-HH:MM`` (several per rule, comma separated),
closing after midnight (``17:00-03:00`` or ``-26:00``) and ``off``/``closed``. Later rules override earlier ones
for the days they name, as the specification says. Anything else (public holidays aside, which are ignored) makes
the whole value unreadable: ``parse`` returns None and the generator does not use that POI's hours.
"""

from __future__ import annotations

import re

DAYS = ("Mo", "Tu", "We", "Th", "Fr", "Sa", "Su")
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_TIME = r"(\d{1,2}):(\d{2})"
_SPAN = re.compile(rf"^{_TIME}-{_TIME}$")
_DAYSPEC = re.compile(r"^(Mo|Tu|We|Th|Fr|Sa|Su)(-(Mo|Tu|We|Th|Fr|Sa|Su))?$")

Week = dict[int, list[tuple[int, int]]]  # day index -> [(start minute, end minute)], end may exceed 24 h


def _days(spec: str) -> list[int] | None:
    out: list[int] = []
    for part in spec.split(","):
        m = _DAYSPEC.match(part.strip())
        if not m:
            return None
        a = DAYS.index(m.group(1))
        b = DAYS.index(m.group(3)) if m.group(3) else a
        out += [(a + k) % 7 for k in range(((b - a) % 7) + 1)]
    return out


def _spans(text: str) -> list[tuple[int, int]] | None:
    out = []
    for part in text.split(","):
        m = _SPAN.match(part.strip())
        if not m:
            return None
        h1, m1, h2, m2 = (int(x) for x in m.groups())
        if h1 > 24 or h2 > 48 or m1 > 59 or m2 > 59:
            return None
        s, e = h1 * 60 + m1, h2 * 60 + m2
        if e <= s:  # closes after midnight
            e += 24 * 60
        out.append((s, e))
    return out


def parse(value: str | None) -> Week | None:
    if not value:
        return None
    v = value.strip()
    if v == "24/7":
        return {d: [(0, 24 * 60)] for d in range(7)}
    # "Mo,Tu 08:00-22:00; We-Sa 08:00-24:00, Su 09:00-22:00": a comma before a day list starts a new rule.
    v = re.sub(r"(?<=\d\d),\s*(?=(Mo|Tu|We|Th|Fr|Sa|Su|PH)\b)", ";", v)
    v = re.sub(r"(?<=Mo|Tu|We|Th|Fr|Sa|Su),\s+(?=Mo|Tu|We|Th|Fr|Sa|Su)", ",", v)  # "Sa, Su" is one day list
    week: Week = {}
    for rule in (r.strip() for r in v.split(";")):
        if not rule:
            continue
        if rule.startswith("PH"):
            continue  # public holidays: no calendar here
        head, _, rest = rule.partition(" ")
        days = _days(head)
        if days is None:
            return None
        rest = rest.strip()
        if rest in ("off", "closed"):
            spans: list[tuple[int, int]] | None = []
        else:
            spans = _spans(rest)
        if spans is None:
            return None
        for d in days:
            week[d] = list(spans)
    return week or None


def is_open(week: Week, day: int, minute: int) -> bool:
    """Open on ``day`` (0 = Monday) at ``minute`` after midnight, counting the previous day's after-midnight hours."""
    if any(s <= minute < e for s, e in week.get(day, [])):
        return True
    return any(e > 24 * 60 and minute < e - 24 * 60 for _, e in week.get((day - 1) % 7, []))


def margin_minutes(week: Week, day: int, minute: int) -> int:
    """Minutes to the nearest opening or closing time around ``minute`` (so a question never sits on a boundary)."""
    best = 10_000
    for d, shift in ((day, 0), ((day - 1) % 7, -24 * 60)):
        for s, e in week.get(d, []):
            for t in (s + shift, e + shift):
                best = min(best, abs(minute - t))
    return best
