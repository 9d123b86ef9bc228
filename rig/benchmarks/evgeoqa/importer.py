"""Read the upstream EVGeoQA files (notes C1.2, C1.3): QA pairs and the station table, both JSON Lines.

- QA record: ``Question_id, Question, Question_location, Question_location_coord`` (the historic sample spells it
  ``Question_location_cord``), ``Question_type, Question_poi, Answer[]``; each answer ``Station_id, Station_name,
  Station_coord`` (or ``Station_cord``), ``Distance`` (km, WGS84 geodesic in the data), ``Station_poi_type``,
  ``Station_poi_name``, ``correlation_measure``. Coordinates in the data are **[lat, lon]**.
- Station record: ``station_name, station_id, address, location`` (a ``"lon,lat"`` string, or null), ``pois[]``
  (``name, type, address, distance`` in metres as a string), ``error``.
Conversions happen here: the records hold ``lat`` / ``lon``; the tools write ``[lon, lat]``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rig.benchmarks.base import DataError, nesting_error, read_data
from rig.benchmarks.evgeoqa.data import AnswerStation, Dataset, Query, Setting, Station
from rig.benchmarks.evgeoqa.world import PoiHit, UpstreamWorld
from rig.maps.geo import geodesic_m, haversine_m
from rig.maps.records import Extent

QA_NAMES = ("QA_Pairs.json", "QA_Pairs.jsonl", "qa_pairs.json", "qa_pairs.jsonl")
STATION_NAMES = ("Stations.json", "Stations.jsonl", "stations.json", "stations.jsonl")


class ImportError_(ValueError):
    """Bad upstream input; str() names the file, the line and the field."""


def find_files(path: Path) -> tuple[Path, Path] | None:
    """(QA file, station file) for a directory holding both, or a QA file with the station file beside it."""
    path = Path(path)
    qa = next((path / n for n in QA_NAMES if (path / n).is_file()), None) if path.is_dir() else path
    if qa is None or not qa.is_file():
        return None
    st = next((qa.parent / n for n in STATION_NAMES if (qa.parent / n).is_file()), None)
    if st is None:
        raise ImportError_(f"{qa}: no station table beside it (one of {', '.join(STATION_NAMES)}); the tools need it")
    return qa, st


def read_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """JSON Lines (the upstream ``.json`` files are JSONL); a single JSON array is accepted too."""
    try:
        text = read_data(path).decode("utf-8-sig")
    except DataError as e:
        raise ImportError_(str(e)) from None
    except UnicodeDecodeError as e:
        raise ImportError_(f"{path}: not UTF-8 text (byte {e.start})") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        rows = _json(stripped, str(path))
        if not isinstance(rows, list):
            raise ImportError_(f"{path}: expected a JSON array of records or JSON Lines")
        return [(i + 1, r) for i, r in enumerate(rows)]
    out = []
    # JSON Lines end at "\n" only: str.splitlines would also split at U+2028 or U+0085 inside a JSON string
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip():
            out.append((n, _json(line, f"{path}:{n}")))
    return out


def _json(text: str, where: str) -> Any:
    """One JSON value of a data file; unparseable, too deep or past Python's integer limit is named at ``where``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportError_(f"{where}: not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:  # an integer past 4,300 digits; nesting past the parser
        raise ImportError_(f"{where}: not valid JSON: {str(exc)[:80] or 'nested past the parser'}") from None
    err = nesting_error(value)
    if err:
        raise ImportError_(f"{where}: {err}")
    return value


def _field(rec: dict[str, Any], where: str, *names: str) -> Any:
    for n in names:
        if n in rec:
            return rec[n]
    raise ImportError_(f"{where}: missing field {' / '.join(names)}")


def _latlon(value: Any, where: str) -> tuple[float, float]:
    """A data coordinate: [lat, lon]. A pair that only makes sense as [lon, lat] is refused, not guessed."""
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        raise ImportError_(f"{where}: expected [lat, lon], got {str(value)[:60]}")
    lat, lon = float(value[0]), float(value[1])
    if not (math.isfinite(lat) and math.isfinite(lon)) or not -180 <= lon <= 180:
        raise ImportError_(f"{where}: [{value[0]}, {value[1]}] is not a coordinate")
    if not -90 <= lat <= 90:
        raise ImportError_(f"{where}: [{value[0]}, {value[1]}] looks like [lon, lat]; the data writes [lat, lon]")
    return lat, lon


def _lonlat_text(value: Any, where: str) -> tuple[float, float] | None:
    """A station ``location``: "lon,lat" (or null)."""
    if value is None or value == "":
        return None
    try:
        lon, lat = (float(x) for x in str(value).split(","))
    except ValueError:
        raise ImportError_(f'{where}: location {str(value)[:40]!r} is not "lon,lat"') from None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ImportError_(f"{where}: location {value!r} is outside [-180, 180] x [-90, 90]")
    return lat, lon


def _metres(value: Any) -> float:
    try:
        return float(str(value).replace("meters", "").strip())
    except ValueError:
        return float("nan")


def read_stations(path: Path) -> tuple[list[Station], list[list[PoiHit]], list[str]]:
    """Stations with a location, and each one's POI list (aligned by position: ids repeat upstream)."""
    stations: list[Station] = []
    pois: list[list[PoiHit]] = []
    no_loc = 0
    for n, rec in read_lines(path):
        where = f"{path}:{n}"
        if not isinstance(rec, dict):
            raise ImportError_(f"{where}: expected an object")
        sid = str(_field(rec, where, "station_id")).strip()
        name = str(_field(rec, where, "station_name")).strip()
        loc = _lonlat_text(rec.get("location"), where)
        if loc is None:
            no_loc += 1
            continue
        stations.append(
            Station(station_id=sid, name=name, lat=loc[0], lon=loc[1], address=str(rec.get("address") or ""))
        )
        plist = []
        for j, p in enumerate(rec.get("pois") or []):
            if not isinstance(p, dict) or not p.get("name"):
                raise ImportError_(f"{where}: pois[{j}] has no name")
            plist.append(
                PoiHit(
                    key=str(p["name"]).strip(),
                    name=str(p["name"]).strip(),
                    type=str(p.get("type") or ""),
                    address=str(p.get("address") or ""),
                    distance_m=_metres(p.get("distance")),
                )
            )
        pois.append(plist)
    notes = [f"{len(stations)} stations with a location in {path.name}"]
    if no_loc:
        notes.append(f"{no_loc} station records without a location left out (no tool can find them)")
    return stations, pois, notes


def read_queries(path: Path, city: str, setting: Setting) -> list[Query]:
    out = []
    seen: set[str] = set()
    for n, rec in read_lines(path):
        where = f"{path}:{n}"
        if not isinstance(rec, dict):
            raise ImportError_(f"{where}: expected an object")
        qid = str(_field(rec, where, "Question_id")).strip()
        if qid in seen:
            raise ImportError_(f"{where}: Question_id {qid} appears twice")
        seen.add(qid)
        lat, lon = _latlon(
            _field(rec, where, "Question_location_coord", "Question_location_cord"), f"{where}: Question_location_coord"
        )
        raw = _field(rec, where, "Answer")
        if not isinstance(raw, list) or not raw:
            raise ImportError_(f"{where}: Answer must be a non-empty list")
        answers = []
        for j, a in enumerate(raw):
            aw = f"{where}: Answer[{j}]"
            if not isinstance(a, dict):
                raise ImportError_(f"{aw}: expected an object")
            slat, slon = _latlon(_field(a, aw, "Station_coord", "Station_cord"), f"{aw}.Station_coord")
            poi = str(a.get("Station_poi_name") or "").strip()
            dist = a.get("Distance")
            answers.append(
                AnswerStation(
                    station_id=str(_field(a, aw, "Station_id")).strip(),
                    name=str(_field(a, aw, "Station_name")).strip(),
                    lat=slat,
                    lon=slon,
                    drive_m=float(dist) * 1000 if isinstance(dist, (int, float)) else None,
                    geodesic_m=round(geodesic_m(lat, lon, slat, slon), 1),
                    poi_keys=[poi] if poi else [],
                    poi_names=[poi] if poi else [],
                )
            )
        reach = any(a.geodesic_m <= setting.search_radius_m for a in answers)
        out.append(
            Query(
                id=qid,
                city=city,
                question=str(_field(rec, where, "Question")).strip(),
                location_text=str(rec.get("Question_location") or "").strip(),
                lat=lat,
                lon=lon,
                intent=str(rec.get("Question_poi") or "").strip(),
                template=str(rec.get("Question_type") or "").strip(),
                answers=answers,
                tier_distance_m=answers[0].geodesic_m,
                reachable=reach,
                source="upstream",
            )
        )
    return out


def load_upstream(path: Path, city: str = "upstream") -> tuple[Dataset, UpstreamWorld]:
    files = find_files(path)
    if files is None:
        raise ImportError_(f"{path}: no upstream QA file (one of {', '.join(QA_NAMES)})")
    qa, st = files
    setting = Setting.paper()
    stations, pois, notes = read_stations(st)
    queries = read_queries(qa, city, setting)
    if not queries:
        raise ImportError_(f"{qa}: no QA records")
    # Answer stations missing from the table still have to resolve (by id) when the model names them.
    known = {s.station_id for s in stations}
    added = 0
    for q in queries:
        for a in q.answers:
            if a.station_id not in known:
                stations.append(Station(station_id=a.station_id, name=a.name, lat=a.lat, lon=a.lon))
                pois.append([])
                known.add(a.station_id)
                added += 1
    if added:
        notes.append(f"{added} answer stations missing from {st.name} added (without POIs)")
    lats = [s.lat for s in stations] + [q.lat for q in queries]
    lons = [s.lon for s in stations] + [q.lon for q in queries]
    pad_lat = setting.search_radius_m / 111_195.0
    mid = math.radians(sum(lats) / len(lats))
    pad_lon = pad_lat / max(0.1, math.cos(mid))
    extent = Extent(
        min_lat=min(lats) - pad_lat,
        min_lon=min(lons) - pad_lon,
        max_lat=max(lats) + pad_lat,
        max_lon=max(lons) + pad_lon,
    )
    setting = setting.model_copy(
        update={"extent_diag_m": round(haversine_m(extent.min_lat, extent.min_lon, extent.max_lat, extent.max_lon), 1)}
    )
    world = UpstreamWorld(stations, pois, setting, city, extent)
    return Dataset(city=city, setting=setting, stations=stations, queries=queries, notes=notes), world
