"""Importer for the upstream MobilityBench dataset (CSV or XLSX) and its sandbox replay files.

Rows follow the reference loader (notes A1.3): ids ``case_1..N`` unless a ``case_id`` column exists; structured cells
are tried as JSON, then as Python literals, else kept as text (cells cut at the spreadsheet limit of 32,767
characters stay text and are reported; the answer metric repairs them when it reads them). A row that cannot become
an episode (no query, unknown scenario, unreadable tool program) is reported and skipped, never fatal.

The upstream data has no stated license: keep it outside the repository and point ``--data`` at it.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import hashlib
import io
import json
import math
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rig.benchmarks.base import DataError, nesting_error, read_data, read_json
from rig.benchmarks.mobilitybench.data import Case
from rig.benchmarks.mobilitybench.lexicon import EVAL_TYPE, SCENARIOS, lookup_scenario
from rig.benchmarks.mobilitybench.scoring.records import Checks, ConstraintItem, Truth
from rig.benchmarks.mobilitybench.scoring.text import repair_literal, traffic_truth
from rig.benchmarks.mobilitybench.tools import GT_ALIASES, ROUTE_TOOLS, STRATEGY_ZH_TO_EN, lonlat, parse_lonlat

CELL_LIMIT = 32767
PARSED = (
    "tool_list",
    "poi_result",
    "route_ans",
    "strategy_list",
    "context",
    "std_start",
    "std_transit",
    "std_end",
    "near_poi_info",
    "near_poi_ans",
    "bus_lines_list",
    "query_poi",
    "weather",
    "location_ans",
    "ans_loc",
)
CASE_FIELDS = ("case_id", "query", "context", "task_scenario", "intent_family")
_MODES = {"驾车": "drive", "公交": "transit", "步行": "walk", "骑行": "bike"}


class ImportReport(BaseModel):
    file: str
    rows: int = 0
    cases: int = 0
    truncated: list[tuple[str, str]] = Field(default_factory=list)  # (case id, column)
    malformed: list[tuple[int, str]] = Field(default_factory=list)  # (1-based data row, reason)

    def summary(self) -> str:
        return (
            f"{self.rows} rows, {self.cases} cases, {len(self.truncated)} truncated cells, "
            f"{len(self.malformed)} malformed rows"
        )


def parse_cell(value: Any) -> Any:
    """JSON, else a Python literal, else the text; empty / NaN -> None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if not isinstance(value, str):
        return value
    if not value.strip() or value.strip().lower() == "nan":
        return None
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        try:
            with warnings.catch_warnings():  # "invalid decimal literal" and the like: the cell stays text
                warnings.simplefilter("ignore", SyntaxWarning)
                parsed = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # TypeError: `{{}}`
            return value
    return value if nesting_error(parsed) else parsed  # too deep for the walks that follow: kept as text


def _rows(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
        try:
            text = read_data(path).decode("utf-8-sig")
            return [dict(r) for r in csv.DictReader(io.StringIO(text, newline=""))]
        except UnicodeDecodeError as e:
            raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None
        except csv.Error as e:
            raise DataError(f"{path}: not a readable CSV file ({e})") from None
    if suffix in (".xlsx", ".xlsm"):
        try:
            import openpyxl
        except ImportError:
            raise DataError(
                f"{path}: reading XLSX needs openpyxl (pip install 'rig[mobility]'), or convert it to CSV"
            ) from None
        try:
            wb = openpyxl.load_workbook(io.BytesIO(read_data(path)), read_only=True, data_only=True)
            rows = list(wb.active.iter_rows(values_only=True))
        except DataError:
            raise
        except Exception as e:  # openpyxl raises zip, XML and its own errors on a damaged workbook
            raise DataError(f"{path}: not a readable XLSX workbook ({type(e).__name__}: {e})") from None
        if not rows:
            return []
        head = [str(h) if h is not None else "" for h in rows[0]]
        return [dict(zip(head, r, strict=False)) for r in rows[1:]]
    raise DataError(f"{path}: expected a .csv or .xlsx MobilityBench dataset")


def load_upstream(path: Path) -> tuple[list[Case], ImportReport]:
    rep = ImportReport(file=path.name)
    raw = _rows(path)
    rep.rows = len(raw)
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for n, row in enumerate(raw, start=1):
        cid = str(row.get("case_id") or f"case_{n}")
        if cid in seen:  # episode ids are case ids: a second one would collide with the first's results
            raise DataError(f"{path}: row {n}, field case_id: duplicate case id {cid!r} (also row {seen[cid]})")
        seen[cid] = n
        for col, v in row.items():
            if isinstance(v, str) and len(v) >= CELL_LIMIT:
                rep.truncated.append((cid, col))
        try:
            cases.append(_case(cid, row))
        except ValueError as exc:
            rep.malformed.append((n, f"{cid}: {exc}"))
        except (TypeError, KeyError, AttributeError, IndexError, OverflowError, RecursionError) as exc:
            # a cell of an unexpected shape (a set where a dict belongs, a key missing inside a literal, ...)
            rep.malformed.append((n, f"{cid}: a cell of an unexpected shape ({type(exc).__name__}: {exc})"))
    rep.cases = len(cases)
    return cases, rep


def _case(cid: str, row: dict[str, Any]) -> Case:
    cells = {k: (parse_cell(v) if k in PARSED else (None if v in ("", None) else v)) for k, v in row.items() if k}
    if isinstance(cells.get("ans"), str):  # Traffic rows: an AMap traffic answer as a Python literal, maybe cut
        fixed = repair_literal(cells["ans"])
        if isinstance(fixed, dict):
            cells["ans"] = fixed
    query = cells.get("query")
    scenario = str(cells.get("task_scenario") or "").strip()
    if not query:
        raise ValueError("no query")
    if lookup_scenario(SCENARIOS, scenario) is None:
        raise ValueError(f"unknown task_scenario {scenario!r}")
    tool_list = cells.get("tool_list") or []
    if not isinstance(tool_list, list) or not all(isinstance(c, dict) and "name" in c for c in tool_list):
        raise ValueError("tool_list is not a list of {name, arguments}")
    context = cells.get("context")
    if not isinstance(context, dict):
        raise ValueError("context is not a dict literal")
    family = str(cells.get("intent_family") or lookup_scenario(SCENARIOS, scenario))
    slots = {k: v for k, v in cells.items() if k not in CASE_FIELDS and k != "tool_list"}
    slots.setdefault("llm_class", "")
    truth = Truth(
        scenario=scenario,
        family=family,
        tool_list=tool_list,
        slots=slots,
        lang="zh",
        constraints=_constraints(scenario, slots, context),
        checks=_checks(scenario, slots, tool_list),
    )
    return Case(
        id=cid, query=str(query), scenario=scenario, family=family, context=context, truth=truth, source="upstream"
    )


def _constraints(scenario: str, s: dict[str, Any], context: dict[str, Any]) -> list[ConstraintItem] | None:
    """The GT constraint set for paper-mode IE, from the slot columns the dataset has."""
    if scenario in ("POI Query", "Geolocation Query"):
        return None  # the data carries no slot for the asked place
    out: list[ConstraintItem] = []

    def add(slot: str, v: Any) -> None:
        if v not in (None, "", []):
            out.append(ConstraintItem(slot=slot, values=[str(v)]))

    if scenario == "Weather Query":
        add("city", s.get("city"))
        add("time", s.get("time"))
        return out
    if scenario == "Traffic Info Query":
        add("road", s.get("road"))
        return out
    if scenario == "Nearby Query":
        add("category", s.get("near_poi_info"))
        add("near", s.get("query_poi"))
        return out
    add("origin", s.get("query_start_poi"))
    add("waypoints", s.get("query_transit_poi"))
    add("destination", s.get("query_end_poi"))
    add("mode", _MODES.get(str(context.get("travel_tool") or "")))
    for p in s.get("strategy_list") or []:
        out.append(ConstraintItem(slot="preferences", values=[STRATEGY_ZH_TO_EN.get(p, p), p]))
    if scenario == "Route-Constrained Planning":
        out += route_constraints(s.get("llm_ner_ans"), s.get("bus_lines_list"))
    if scenario == "Arrival/Departure Time Query" and s.get("time") not in (None, ""):
        t = str(s["time"]).strip()
        out.append(ConstraintItem(slot="time", values=list(dict.fromkeys([t, *_clock_spellings(t)]))))
    return out


# Route-Constrained rows: llm_ner_ans lists the path constraints, e.g. "不要1号线,不要八通线" (sometimes after prompt
# residue such as "输出:"). A negated item is an avoid constraint; any other item a place or line to pass (waypoints).
_NER_RESIDUE = re.compile(r"^.*?(?:输出|output)\s*[:：]\s*", re.IGNORECASE | re.DOTALL)
_NEGATION = re.compile(r"^(?:不要|不想|不坐|不乘|不走|不经过|不去|别走|别坐|避开|绕开|避免|排除)\s*")
_POSITIVE = re.compile(r"^(?:要|想|坐|乘|乘坐|走|经过|途经|必须)\s*")


def route_constraints(ner: Any, bus_lines: Any) -> list[ConstraintItem]:
    """The avoid / pass-through items of a Route-Constrained row. Each value's spellings: the bare name, the phrase
    as written, and the transit line names of ``bus_lines_list`` that contain it (a model may name the full line)."""
    if ner is None or not str(ner).strip() or str(ner).strip().lower() == "nan":
        return []
    text = _NER_RESIDUE.sub("", str(ner).strip())
    lines = (
        sorted({str(x) for plan in bus_lines if isinstance(plan, (list, tuple)) for x in plan})
        if isinstance(bus_lines, (list, tuple))
        else []
    )
    out: list[ConstraintItem] = []
    for raw in re.split(r"[,，、;；\n]+", text):
        phrase = raw.strip().strip("。.")
        if not phrase:
            continue
        neg = _NEGATION.match(phrase)
        name = phrase[neg.end() :] if neg else _POSITIVE.sub("", phrase)
        if not name:
            continue
        full = [ln for ln in lines if name in ln and ln != name]
        out.append(
            ConstraintItem(slot="avoid" if neg else "waypoints", values=list(dict.fromkeys([name, phrase, *full])))
        )
    return out


def _clock_spellings(t: str) -> list[str]:
    """ "HH:MM" for a clock time written as 8:30, 8点30, 8点半, 下午3点 (none when it is not one)."""
    m = re.search(r"(上午|早上|下午|晚上|傍晚|中午)?\s*(\d{1,2})\s*(?:[:：]|点)\s*(半|\d{1,2})?", t)
    if not m:
        return []
    h = int(m.group(2))
    mm = 30 if m.group(3) == "半" else int(m.group(3) or 0)
    if m.group(1) in ("下午", "晚上", "傍晚") and h < 12:
        h += 12
    return [f"{h:02d}:{mm:02d}"] if h < 24 and mm < 60 else []


def _lonlat_of(v: Any) -> str | None:
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return lonlat(float(v[1]), float(v[0]))
    if isinstance(v, str) and parse_lonlat(v):
        return v
    return None


def _checks(scenario: str, s: dict[str, Any], tool_list: list[dict[str, Any]]) -> Checks:
    et = lookup_scenario(EVAL_TYPE, scenario)
    ch = Checks()
    if et in ("route", "route_custom", "route_info"):
        routes = [c for c in tool_list if GT_ALIASES.get(c["name"], c["name"]) in ROUTE_TOOLS]
        if routes:
            a = routes[-1].get("arguments") or {}
            ch.route = {
                "tool": routes[-1]["name"],
                "origin": a.get("origin"),
                "destination": a.get("destination"),
                "waypoints": a.get("waypoints") or [],
                "strategy": a.get("strategy") or [],
            }
            if routes[-1]["name"] == "bus_route":
                ch.route["strategy"] = []
        idx = s.get("matched_transit_index")
        if et == "route_custom" and idx not in (None, ""):
            ch.route_index = int(float(idx))
        ans = s.get("route_ans")
        ans = repair_literal(ans) if isinstance(ans, str) else ans
        paths = ((ans or {}).get("route") or {}).get("paths") if isinstance(ans, dict) else None
        if scenario == "Route Property Query" and paths:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                ch.distance_m = float(paths[0]["distance"])
        # (?<!\d): a match failing inside a long digit run is not retried from each of its digits (quadratic)
        m = re.search(r"(?<!\d)(\d+)\s*分钟", str(s.get("duration") or ""))
        h = re.search(r"(?<!\d)(\d+)\s*小时", str(s.get("duration") or ""))
        if scenario == "Arrival/Departure Time Query" and (m or h):
            ch.duration_s = (int(h.group(1)) * 3600 if h else 0) + (int(m.group(1)) * 60 if m else 0)
    elif et == "weather" and s.get("weather_description"):
        ch.similar = str(s["weather_description"])
    elif et == "location" and s.get("formatted_address"):
        ch.similar = str(s["formatted_address"])
    elif et == "traffic":
        ch.traffic = traffic_truth(s.get("ans"))  # the status the answer must state (issue 19)
    elif et == "poi":
        res = s.get("poi_result")
        res = repair_literal(res) if isinstance(res, str) else res
        name = ((res or {}).get("data") or {}).get("name") if isinstance(res, dict) else None
        if name:
            ch.places = [str(name)]
        data = ((res or {}).get("data") or {}) if isinstance(res, dict) else {}
        loc = _lonlat_of(s.get("ans_loc")) or (data.get("location") if isinstance(res, dict) else None)
        p = parse_lonlat(loc) if loc else None
        if p:
            ch.coord = {"lat": p[0], "lon": p[1], "max_m": 1000.0}
    elif et == "nearby":
        ans = s.get("near_poi_ans")
        ans = repair_literal(ans) if isinstance(ans, str) else ans
        pois = ((ans or {}).get("data") or {}).get("pois") if isinstance(ans, dict) else None
        ch.places = [str(p.get("name")) for p in (pois or [])[:5] if isinstance(p, dict) and p.get("name")]
    return ch


# -- sandbox replay files --------------------------------------------------------------------------------------

SANDBOX_FILES = {
    "query_poi": "nested_poi_data.json",
    "driving_route": "driving_route_handle.json",
    "walking_route": "walking_route_handle.json",
    "bicycling_route": "bicycling_route_handle.json",
    "bus_route": "bus_route_mock.json",
    "weather_query": "weather_sandbox.json",
    "search_around_poi": "search_around_poi_sandbox.json",
    "reverse_geocoding": "reverse_geocoding_sandbox.json",
    "traffic_status": "traffic_info_mock.json",
}


def sandbox_entries(sandbox_dir: Path) -> tuple[list[tuple[str, dict[str, Any], Any]], list[str]]:
    """(tool, arguments, response) from the upstream sandbox files present; and the files that are missing."""
    from rig.maps.dialects import mobility_envelope

    entries: list[tuple[str, dict[str, Any], Any]] = []
    missing = []
    for tool, fname in SANDBOX_FILES.items():
        path = sandbox_dir / fname
        if not path.is_file():
            missing.append(fname)
            continue
        doc = read_json(path)
        if tool == "query_poi":
            for kw, by_city in doc.items():
                first = next(iter(by_city.values()), None) if isinstance(by_city, dict) else None
                if first is not None:  # the reference falls back to the keyword's first city entry
                    entries.append((tool, {"keywords": kw}, mobility_envelope(True, first)))
        elif tool == "driving_route":
            for dest, origins in doc.items():
                for orig, strategies in origins.items():
                    for skey, wps in strategies.items():
                        strategy = [] if skey == "default" else sorted(skey.split("+"))
                        for wkey, resp in wps.items():
                            waypoints = [] if wkey == "default" else wkey.split(";")
                            entries.append(
                                (
                                    tool,
                                    {"origin": orig, "destination": dest, "strategy": strategy, "waypoints": waypoints},
                                    mobility_envelope(True, resp),
                                )
                            )
        elif tool in ("walking_route", "bicycling_route"):
            for dest, origins in doc.items():
                for orig, resp in origins.items():
                    entries.append((tool, {"origin": orig, "destination": dest}, mobility_envelope(True, resp)))
        elif tool == "bus_route":
            for dest, origins in doc.items():
                for orig, wrapped in origins.items():
                    ok = isinstance(wrapped, dict) and wrapped.get("status") == "SUCCESS"
                    entries.append(
                        (
                            tool,
                            {"origin": orig, "destination": dest},
                            mobility_envelope(ok, wrapped.get("data") if ok else None, None if ok else "FAILED"),
                        )
                    )
        elif tool == "weather_query":
            for city, by_flag in doc.items():
                for flag, resp in by_flag.items():
                    entries.append(
                        (tool, {"city": city, "need_forecast": flag == "True"}, mobility_envelope(True, resp))
                    )
        elif tool == "search_around_poi":
            for loc, cats in doc.items():
                for cat, pois in cats.items():
                    entries.append((tool, {"location": loc, "keywords": cat}, mobility_envelope(True, pois)))
        elif tool == "reverse_geocoding":
            for key, address in doc.items():
                lat, _, lon = key.partition(",")  # latitude first in this file
                entries.append(
                    (
                        tool,
                        {"latitude": lat.strip(), "longitude": lon.strip()},
                        mobility_envelope(True, {"address": address}),
                    )
                )
        elif tool == "traffic_status":
            for road, by_city in doc.items():
                for city, resp in by_city.items():
                    entries.append((tool, {"name": road, "city": city}, resp))
    return entries, missing


def upstream_store(sandbox_dir: str | None):
    """A replay store built (once, cached) from the upstream sandbox files; empty without them (every call then
    misses, as the reference does with missing files)."""
    from rig.benchmarks.mobilitybench.data import build_store
    from rig.maps.replay import ReplayStore
    from rig.paths import cache_dir

    if not sandbox_dir:
        path = cache_dir() / "mobilitybench" / "upstream-empty.sqlite"
        if not path.is_file():
            build_store(path, [], "1970-01-01T00:00:00Z")
        return ReplayStore(path)
    d = Path(sandbox_dir)
    if not d.is_dir():
        raise DataError(f"mobilitybench option sandbox_dir: {d} is not a directory")
    h = hashlib.sha256()
    for f in sorted(SANDBOX_FILES.values()):
        p = d / f
        if p.is_file():
            st = p.stat()
            h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}".encode())
    path = cache_dir() / "mobilitybench" / f"upstream-{h.hexdigest()[:16]}.sqlite"
    if not path.is_file():
        entries, _ = sandbox_entries(d)
        build_store(path, entries, "1970-01-01T00:00:00Z")
    return ReplayStore(path)
