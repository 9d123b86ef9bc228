"""The authored MobilityBench pack on the Helsinki map and its replay store.

``episodes.json`` holds English queries for all eleven scenarios with a ground-truth tool program whose coordinates
are placeholders (``$user``, ``$N`` = the location returned by ground-truth call N). Building the store runs each
program once: map tools against the map pack, weather / traffic / transit from ``recorded.json``; every answer goes
into a ReplayStore keyed by the resolved arguments, and the answer-dependent checks (route distance and duration,
departure time, nearby names, address) are filled from those answers. The store is cached per content hash of the
two files, the pack's source and this module's format.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rig.benchmarks.base import DataError, read_data, read_json
from rig.benchmarks.mobilitybench.lexicon import SCENARIOS
from rig.benchmarks.mobilitybench.scoring.records import Checks, ConstraintItem, Truth
from rig.benchmarks.mobilitybench.tools import (
    KEY_SPECS,
    PROVIDER,
    RECORDED_ONLY,
    TOOL_NAMES,
    MobilityService,
    canonical_args,
    parse_lonlat,
    schemas,
)

BUILD_FORMAT = 1
EPISODES_FILE = "episodes.json"
RECORDED_FILE = "recorded.json"


class Case(BaseModel):
    """One MobilityBench episode, ready to run: what the agent sees and what the metrics need."""

    id: str
    query: str
    scenario: str
    family: str
    context: dict[str, Any]  # user_current_location ("lon,lat"), city, ...
    truth: Truth
    source: str = "authored"  # authored | upstream


class ResolvedPack(BaseModel):
    cases: list[Case]
    entries: list[tuple[str, dict[str, Any], Any]] = Field(default_factory=list)  # (tool, args, response)
    current_time: str


def data_files(data: Path) -> list[Path]:
    return [data / EPISODES_FILE, data / RECORDED_FILE]


def _sub(value: Any, user: str, locs: list[str | None], where: str) -> Any:
    """Replace $user / $N placeholders (also inside strings, e.g. "origin": "$user")."""
    if isinstance(value, str) and re.fullmatch(r"\$(user|\d+)", value):
        if value == "$user":
            return user
        i = int(value[1:])
        if i >= len(locs) or locs[i] is None:
            raise DataError(f"{where}: {value} refers to a call without a location")
        return locs[i]
    if isinstance(value, list):
        return [_sub(v, user, locs, where) for v in value]
    if isinstance(value, dict):
        return {k: _sub(v, user, locs, where) for k, v in value.items()}
    return value


def _location(name: str, resp: Any) -> str | None:
    if name == "query_poi" and isinstance(resp, dict):
        loc = (resp.get("data") or {}).get("location")
        return loc if isinstance(loc, str) else None
    return None


def _route_summary(resp: Any) -> tuple[float | None, float | None]:
    data = resp.get("data", resp) if isinstance(resp, dict) else {}
    route = data.get("route", {}) if isinstance(data, dict) else {}
    if route.get("paths"):
        p = route["paths"][0]
        return float(p["distance"]), float(p["cost"]["duration"])
    if route.get("transits"):
        t = route["transits"][0]
        return float(t["distance"]), float(t["cost"]["duration"])
    return None, None


def _clock(hhmm: str, delta_s: float) -> str:
    h, m = (int(x) for x in hhmm.split(":"))
    total = (h * 60 + m) * 60 + delta_s
    mins = int(total // 60) % 1440 if delta_s < 0 else round(total / 60) % 1440
    return f"{mins // 60:02d}:{mins % 60:02d}"


def resolve(data: Path, pack: Any) -> ResolvedPack:
    """Run every ground-truth program against the map pack and the recordings; DataError on authoring faults."""
    from rig.maps.validate import ArgumentError, validate

    ep_path, rec_path = data / EPISODES_FILE, data / RECORDED_FILE
    doc, rec = read_json(ep_path), read_json(rec_path)
    if not isinstance(doc, dict) or not isinstance(doc.get("episodes"), list):
        raise DataError(f"{ep_path}: field 'episodes' must be a list")
    recorded = rec.get("responses", {}) if isinstance(rec, dict) else {}
    service = MobilityService(store=None, pack=pack, sandbox="pack")
    tool_schemas = schemas("en")
    cases, entries, seen = [], [], set()
    for n, ep in enumerate(doc["episodes"]):
        where = f"{ep_path.name}: episodes[{n}]"
        try:
            eid, scenario, user = ep["id"], ep["scenario"], ep["user_location"]
            ep["query"]  # required; read again when the case is built
        except (KeyError, TypeError) as exc:
            raise DataError(f"{where}: missing field {exc}") from None
        if eid in seen:
            raise DataError(f"{where}: duplicate id {eid!r}")
        seen.add(eid)
        if scenario not in SCENARIOS:
            raise DataError(f"{where}.scenario: {scenario!r} is not one of the 11 scenarios")
        if parse_lonlat(user) is None:
            raise DataError(f'{where}.user_location: {user!r} is not "lon,lat"')
        locs: list[str | None] = []
        program: list[dict[str, Any]] = []
        answers: list[Any] = []
        for i, call in enumerate(ep.get("tool_list") or []):
            cw = f"{where}.tool_list[{i}]"
            name = call.get("name")
            if name not in TOOL_NAMES:
                raise DataError(f"{cw}.name: {name!r} is not a sandbox tool")
            args = canonical_args(name, _sub(call.get("arguments") or {}, user, locs, cw))
            if name in RECORDED_ONLY:
                resp = (recorded.get(eid) or {}).get(str(i))
                if resp is None:
                    raise DataError(f"{rec_path.name}: responses.{eid}.{i}: no recorded response for {name}")
                resp = _sub(resp, user, locs, f"{rec_path.name}: responses.{eid}.{i}")
                try:
                    full = validate(args, tool_schemas[name][1])
                except ArgumentError as exc:
                    raise DataError(f"{cw}.arguments: {exc}") from None
            else:
                res = service.call(name, args)
                if not res.ok:
                    raise DataError(f"{cw}: the ground-truth call fails on this map pack: {res.error}")
                resp, full = res.data, res.meta.get("arguments") or args
            entries.append((name, full, resp))
            program.append({"name": name, "arguments": args})
            answers.append(resp)
            locs.append(_location(name, resp))
        cases.append(_case(ep, where, program, answers, user, doc.get("city", ""), doc.get("current_time", "")))
    return ResolvedPack(cases=cases, entries=entries, current_time=str(doc.get("current_time", "")))


def _case(
    ep: dict[str, Any], where: str, program: list[dict[str, Any]], answers: list[Any], user: str, city: str, now: str
) -> Case:
    spec = ep.get("checks") or {}
    checks = Checks(facts=spec.get("facts") or [])
    slots = dict(ep.get("slots") or {})

    def ans(key: str) -> tuple[int, Any]:
        i = int(spec[key]) if not isinstance(spec[key], bool) else len(answers) - 1
        if not 0 <= i < len(answers):
            raise DataError(f"{where}.checks.{key}: no ground-truth call {i}")
        return i, answers[i]

    if "route" in spec:
        i, resp = ans("route")
        a = program[i]["arguments"]
        checks.route = {
            "tool": program[i]["name"],
            "origin": a["origin"],
            "destination": a["destination"],
            "waypoints": a.get("waypoints") or [],
            "strategy": a.get("strategy") or [],
        }
        dist, dur = _route_summary(resp)
        if spec.get("distance"):
            checks.distance_m = dist
        if spec.get("duration"):
            checks.duration_s = dur
        clock = spec.get("clock") or {}
        if "arrive_by" in clock and dur is not None:
            checks.clock = _clock(clock["arrive_by"], -dur)
        if "depart_at" in clock and dur is not None:
            checks.clock = _clock(clock["depart_at"], dur)
        slots["route_ans"] = {"distance_m": dist, "duration_s": dur}
    if "route_index" in spec:
        checks.route_index = int(spec["route_index"])
    if "poi" in spec:
        _, resp = ans("poi")
        d = resp["data"]
        lat, lon = parse_lonlat(d["location"])  # type: ignore[misc]
        street = (d.get("address") or "").split(",")[0].strip()
        checks.places = [street] if street else [d["name"]]
        checks.coord = {"lat": lat, "lon": lon, "max_m": 250.0}
        slots["poi_result"] = resp
    if "address" in spec:
        _, resp = ans("address")
        address = resp["data"]["address"]
        checks.facts.append([address.split(",")[0].strip()])
        slots["formatted_address"] = address
    if "nearby" in spec:
        _, resp = ans("nearby")
        pois = resp.get("data") or []
        checks.places = [p["name"] for p in pois[:5]]
        slots["near_poi_ans"] = {"data": {"pois": pois}}
    if "weather" in spec:
        _, resp = ans("weather")
        slots["weather_description"] = resp["data"]["weather_description"]
    if "traffic" in spec:
        _, resp = ans("traffic")
        slots["ans"] = resp
    constraints = [ConstraintItem.model_validate(c) for c in ep.get("constraints") or []]
    truth = Truth(
        scenario=ep["scenario"],
        family=SCENARIOS[ep["scenario"]],
        tool_list=program,
        slots=slots,
        constraints=constraints,
        checks=checks,
        lang="en",
    )
    context = {"user_current_location": user, "city": city, "current_time": now}
    return Case(
        id=ep["id"],
        query=ep["query"],
        scenario=ep["scenario"],
        family=SCENARIOS[ep["scenario"]],
        context=context,
        truth=truth,
    )


def content_digest(data: Path, pack_sha: str) -> str:
    h = hashlib.sha256(f"mobilitybench-store-v{BUILD_FORMAT}:{pack_sha}".encode())
    for p in data_files(data):
        h.update(read_data(p))
    return h.hexdigest()[:16]


def build_store(path: Path, entries: list[tuple[str, dict[str, Any], Any]], recorded_at: str) -> None:
    """Write the replay store beside ``path`` and rename it into place (concurrent builders never see a partial
    file)."""
    from rig.maps.replay import ReplayStore

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)
    store = ReplayStore(tmp)
    try:
        for name in TOOL_NAMES:
            store.register(PROVIDER, name, KEY_SPECS[name])
        for name, args, resp in entries:
            store.put(PROVIDER, name, args, resp, recorded_at=recorded_at)
    finally:
        store.close()
    os.replace(tmp, path)
