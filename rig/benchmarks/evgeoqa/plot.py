"""A map of one GeoRover trajectory as a self-contained SVG (no scripts, no fonts, no fetches), as in the paper's
Figure 5: the user, the moves, where the agent searched, the stations it saw, the ground truth and its answer.

Drawing only, from one stored result and its query: `rig trajectory RUN_DIR` (`rig/render/trajectory.py`) reads the
run folder, which a benchmark may not (the run layers sit above the benchmarks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rig.benchmarks.evgeoqa.data import Query, Setting
from rig.names import escape
from rig.records import EpisodeResult

_C = {
    "road": "#d9d9d9",
    "search": "#3b6fb6",
    "poi": "#2e8b57",
    "move": "#222",
    "refused": "#c0392b",
    "seen": "#888",
    "truth": "#2e8b57",
    "hit": "#2e8b57",
    "miss": "#c0392b",
    "user": "#e67e22",
}


def road_segments(pack, mode: str = "drive") -> list[tuple[float, float, float, float]]:
    """(lat1, lon1, lat2, lon2) of the pack's edges usable by ``mode``, for a background."""
    from rig.maps.profiles import MODE_BITS

    g = pack.graph  # the edge table
    out, done = [], set()
    for e in range(len(g["src"])):
        a, b = int(g["src"][e]), int(g["dst"][e])
        if g["modes"][e] & MODE_BITS[mode] and (min(a, b), max(a, b)) not in done:
            done.add((min(a, b), max(a, b)))  # both directions of a two-way street: one line
            out.append(
                (float(g["node_lat"][a]), float(g["node_lon"][a]), float(g["node_lat"][b]), float(g["node_lon"][b]))
            )
    return out


def trajectory_svg(
    result: EpisodeResult,
    query: Query,
    setting: Setting,
    roads: list[tuple[float, float, float, float]] | None = None,
    width: int = 720,
) -> str:
    trace: dict[str, Any] = (result.output or {}).get("trace") or {}
    answer: list[dict[str, Any]] = (result.output or {}).get("answer") or []
    user = (query.lat, query.lon)
    moves = trace.get("moves") or []
    searches = trace.get("searches") or []
    seen = trace.get("seen_stations") or {}
    pts = [user] + [tuple(m["to"]) for m in moves] + [(s["lat"], s["lon"]) for s in searches]
    pts += [tuple(v) for v in seen.values()] + [(a.lat, a.lon) for a in query.answers]
    pts += [(a["lat"], a["lon"]) for a in answer if a.get("lat") is not None]
    fr = _Frame.around(pts, setting.walk_radius_m * 2, width)
    out = _header(fr, result, query, len(moves))
    out.append("<g>")
    out += _roads(fr, roads or [])
    out += _searches(fr, searches, setting)
    out += _moves(fr, moves)
    out += _stations(fr, query, seen, answer)
    out.append(_star(fr, user))
    out.append("</g>")
    out += _legend(fr, setting, answer)
    out.append("</svg>")
    return "\n".join(out)


def _num(v: float) -> str:
    """A coordinate as the SVG gets it: one decimal."""
    return f"{v:.1f}"


@dataclass(frozen=True)
class _Frame:
    """The drawing's extent (the points with a margin) and its projection to SVG pixels, equirectangular around
    the middle latitude."""

    lat0: float
    lat1: float
    lon0: float
    lon1: float
    coslat: float
    scale: float  # pixels per metre
    w_m: float
    width: int
    height: int

    M_PER_DEG = 111_195.0
    TOP = 40
    LEGEND_H = 96

    @classmethod
    def around(cls, pts: list[Any], margin_m: float, width: int) -> _Frame:
        m_per_deg = cls.M_PER_DEG
        lat0, lat1 = min(p[0] for p in pts), max(p[0] for p in pts)
        lon0, lon1 = min(p[1] for p in pts), max(p[1] for p in pts)
        coslat = math.cos(math.radians((lat0 + lat1) / 2))
        pad = max(margin_m, 0.08 * max((lat1 - lat0) * m_per_deg, (lon1 - lon0) * m_per_deg * coslat, 1))
        lat0, lat1 = lat0 - pad / m_per_deg, lat1 + pad / m_per_deg
        lon0, lon1 = lon0 - pad / (m_per_deg * coslat), lon1 + pad / (m_per_deg * coslat)
        w_m, h_m = (lon1 - lon0) * m_per_deg * coslat, (lat1 - lat0) * m_per_deg
        scale = (width - 20) / w_m
        height = int(h_m * scale) + cls.TOP + cls.LEGEND_H
        return cls(lat0, lat1, lon0, lon1, coslat, scale, w_m, width, height)

    def inside(self, lat: float, lon: float) -> bool:
        return self.lat0 <= lat <= self.lat1 and self.lon0 <= lon <= self.lon1

    def xy(self, lat: float, lon: float) -> tuple[float, float]:
        m_per_deg = self.M_PER_DEG
        return 10 + (lon - self.lon0) * m_per_deg * self.coslat * self.scale, self.TOP + (
            self.lat1 - lat
        ) * m_per_deg * self.scale


def _header(fr: _Frame, result: EpisodeResult, query: Query, moves: int) -> list[str]:
    """The SVG element, the arrow marker, the background and the two title lines."""
    width, height = fr.width, fr.height
    hits = result.scores.get("hits@1")
    title = f"{query.id} (repeat {result.repeat}): {query.question}"
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} '
        f'{height}" font-family="sans-serif" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{_C["move"]}"/></marker></defs>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
        f'<text x="10" y="16" font-size="12" font-weight="bold">{escape(title[:110])}</text>',
        f'<text x="10" y="31">stop: {escape(str(result.tags.get("stop", "?")))}; Hits@1 '
        f"{hits if hits is not None else 'n/a'}; Hits@3 {result.scores.get('hits@3', 'n/a')}; "
        f"moves {moves}; cause: {escape(str(result.error_category or 'none'))}</text>",
    ]


def _roads(fr: _Frame, roads: list[tuple[float, float, float, float]]) -> list[str]:
    out = []
    for la, lo, lb, lob in roads:
        if fr.inside(la, lo):
            (x1, y1), (x2, y2) = fr.xy(la, lo), fr.xy(lb, lob)
            out.append(
                f'<line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" stroke="{_C["road"]}" '
                'stroke-width="1"/>'
            )
    return out


def _searches(fr: _Frame, searches: list[dict[str, Any]], setting: Setting) -> list[str]:
    """Each search as its circle: stations (search radius, dashed blue) or POIs (walk radius, dotted green)."""
    out = []
    for s in searches:
        x, y = fr.xy(s["lat"], s["lon"])
        if s["tool"] == "Search_Stations":
            r = setting.search_radius_m * fr.scale
            out.append(
                f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{_num(r)}" fill="{_C["search"]}" fill-opacity="0.05" '
                f'stroke="{_C["search"]}" stroke-dasharray="5,4"/>'
            )
        else:
            r = setting.walk_radius_m * fr.scale
            out.append(
                f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{_num(r)}" fill="none" stroke="{_C["poi"]}" '
                'stroke-dasharray="2,3"/>'
            )
    return out


def _moves(fr: _Frame, moves: list[dict[str, Any]]) -> list[str]:
    """Each move as a numbered arrow; a refused one dashed red."""
    out = []
    for i, m in enumerate(moves, 1):
        (x1, y1), (x2, y2) = fr.xy(*m["from"]), fr.xy(*m["to"])
        color = _C["move"] if m.get("ok") else _C["refused"]
        dash = "" if m.get("ok") else ' stroke-dasharray="4,3"'
        out.append(
            f'<line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" stroke="{color}" stroke-width="2"'
            f'{dash} marker-end="url(#arrow)"/>'
        )
        out.append(f'<text x="{_num(x2 + 4)}" y="{_num(y2 - 4)}" fill="{color}">m{i}</text>')
    return out


def _stations(fr: _Frame, query: Query, seen: dict[str, Any], answer: list[dict[str, Any]]) -> list[str]:
    """Stations seen (grey), the ground truth GT1.. (filled when seen) and the answers A1.. (hit or miss)."""
    out = []
    truth = {a.station_id for a in query.answers}
    for sid, (la, lo) in seen.items():
        if sid not in truth:
            x, y = fr.xy(la, lo)
            out.append(f'<rect x="{_num(x - 4)}" y="{_num(y - 4)}" width="8" height="8" fill="{_C["seen"]}"/>')
    for rank, a in enumerate(query.answers, 1):
        x, y = fr.xy(a.lat, a.lon)
        fill = _C["truth"] if a.station_id in seen else "#fff"
        out.append(
            f'<rect x="{_num(x - 5)}" y="{_num(y - 5)}" width="10" height="10" fill="{fill}" stroke="{_C["truth"]}" '
            'stroke-width="2"/>'
        )
        out.append(f'<text x="{_num(x + 7)}" y="{_num(y + 4)}" fill="{_C["truth"]}">GT{rank}</text>')
    for i, ans in enumerate(answer, 1):
        if ans.get("lat") is None:
            continue
        x, y = fr.xy(ans["lat"], ans["lon"])
        color = _C["hit"] if ans.get("hit") else _C["miss"]
        out.append(f'<circle cx="{_num(x)}" cy="{_num(y)}" r="9" fill="none" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{_num(x - 9)}" y="{_num(y - 12)}" fill="{color}" font-weight="bold">A{i}</text>')
    return out


def _star(fr: _Frame, user: tuple[float, float]) -> str:
    ux, uy = fr.xy(*user)
    star = " ".join(
        f"{_num(ux + (8 if k % 2 == 0 else 3.5) * math.sin(k * math.pi / 5))},"
        f"{_num(uy - (8 if k % 2 == 0 else 3.5) * math.cos(k * math.pi / 5))}"
        for k in range(10)
    )
    return f'<polygon points="{star}" fill="{_C["user"]}" stroke="#000" stroke-width="0.5"/>'


def _legend(fr: _Frame, setting: Setting, answer: list[dict[str, Any]]) -> list[str]:
    """The scale bar, the legend and the answers that name no known station."""
    out = []
    y0 = fr.height - fr.LEGEND_H + 14
    bar_m = _nice(fr.w_m / 5)
    out.append(f'<line x1="10" y1="{y0}" x2="{_num(10 + bar_m * fr.scale)}" y2="{y0}" stroke="#000" stroke-width="2"/>')
    out.append(f'<text x="{_num(14 + bar_m * fr.scale)}" y="{y0 + 4}">{bar_m:g} m</text>')
    unanswered = [a["text"] for a in answer if a.get("lat") is None]
    items = [
        (_C["user"], "user"),
        (_C["move"], "move (m1, m2, ...)"),
        (_C["refused"], "refused move"),
        (_C["search"], f"Search_Stations ({setting.search_radius_m:g} m)"),
        (_C["poi"], f"Search_Nearby_POI ({setting.walk_radius_m:g} m)"),
        (_C["seen"], "station seen"),
        (_C["truth"], "ground truth GT1.. (filled: seen)"),
        (_C["hit"], "answer A1.. hit"),
        (_C["miss"], "answer miss"),
    ]
    for i, (color, text) in enumerate(items):
        x, y = 10 + (i % 3) * 235, y0 + 20 + (i // 3) * 16
        out.append(
            f'<rect x="{x}" y="{y - 8}" width="10" height="10" fill="{color}"/>'
            f'<text x="{x + 15}" y="{y + 1}">{escape(text)}</text>'
        )
    if unanswered:
        out.append(
            f'<text x="10" y="{fr.height - 6}" fill="{_C["miss"]}">not a known station: '
            f"{escape(', '.join(map(str, unanswered))[:100])}</text>"
        )
    return out


def _nice(x: float) -> float:
    p = 10 ** math.floor(math.log10(max(x, 1e-9)))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= x)
