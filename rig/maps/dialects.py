"""Render map-service records in the response dialects that benchmarks' tools expect.

- Google (RouteEval): Geocoding, Places Nearby and Directions JSON shapes, encoded polylines, lat/lng objects.
- AMap (MobilityBench): web-service JSON (v3 place/regeo, v5 direction), every scalar a string, "lon,lat"
  coordinates; plus the MobilityBench sandbox envelope {status: 0|1, data, error}.
- GeoRover (EVGeoQA): the plain records of its four tools, [lon, lat] lists and "<n> meters" strings.
Renderers take rig records (or their JSON dumps) and never call the map service themselves.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rig.maps.geo import compass, encode_polyline, geodesic_m, offset
from rig.maps.records import GeocodeResult, NearbyResult, Place, ReverseGeocodeResult, Route, RouteStep


def _as(model: type[BaseModel], x: Any) -> Any:
    return x if isinstance(x, model) else model.model_validate(x)


def _lonlat(lat: float, lon: float) -> str:
    return f"{lon:.6f},{lat:.6f}"


# -- Google --------------------------------------------------------------------------------------------


def _latlng(lat: float, lon: float) -> dict[str, float]:
    return {"lat": lat, "lng": lon}


def _text_distance(m: float) -> str:
    return f"{m / 1000:.1f} km" if m >= 1000 else f"{round(m)} m"


def _text_duration(s: float) -> str:
    mins = max(1, round(s / 60))
    return f"{mins // 60} hours {mins % 60} mins" if mins >= 60 else f"{mins} min" + ("s" if mins > 1 else "")


def google_status(ok: bool, error_category: str | None = None, empty: bool = False) -> str:
    if not ok:
        return {"invalid_arguments": "INVALID_REQUEST", "no_route": "ZERO_RESULTS", "not_found": "NOT_FOUND"}.get(
            error_category or "", "UNKNOWN_ERROR"
        )
    return "ZERO_RESULTS" if empty else "OK"


def google_error(error: str, error_category: str | None) -> dict[str, Any]:
    return {"status": google_status(False, error_category), "error_message": error, "results": []}


def _google_place(p: Place) -> dict[str, Any]:
    exact = p.kind in ("address",) or p.address_source == "tags"
    return {
        "place_id": p.place_id,
        "formatted_address": p.address or ", ".join(x for x in (p.name, p.city) if x),
        "name": p.name,
        "geometry": {"location": _latlng(p.lat, p.lon), "location_type": "ROOFTOP" if exact else "GEOMETRIC_CENTER"},
        "types": [
            t
            for t in (
                {"street": "route", "address": "street_address"}.get(p.kind, p.category),
                "point_of_interest" if p.kind == "poi" else None,
            )
            if t
        ],
    }


def google_geocode(results: list[Any]) -> dict[str, Any]:
    rows = [_google_place(_as(GeocodeResult, r)) for r in results]
    return {"results": rows, "status": google_status(True, empty=not rows)}


def google_reverse_geocode(result: Any) -> dict[str, Any]:
    r = _as(ReverseGeocodeResult, result)
    rows = []
    if r.address:
        rows.append(
            {
                "formatted_address": r.address,
                "geometry": {"location": _latlng(r.lat, r.lon)},
                "types": ["street_address"] if r.nearest and r.nearest.kind == "address" else ["route"],
            }
        )
    if r.nearest:
        rows.append(_google_place(r.nearest))
    return {"results": rows, "status": google_status(True, empty=not rows)}


def google_nearby(results: list[Any]) -> dict[str, Any]:
    rows = []
    for x in results:
        p = _as(NearbyResult, x)
        row = {
            "place_id": p.place_id,
            "name": p.name,
            "vicinity": p.address or "",
            "geometry": {"location": _latlng(p.lat, p.lon)},
            "types": [t for t in (p.category,) if t],
        }
        if p.opening_hours:
            row["opening_hours"] = {"weekday_text": [p.opening_hours]}
        rows.append(row)
    return {"results": rows, "status": google_status(True, empty=not rows)}


_GOOGLE_MODE = {"walk": "WALKING", "bike": "BICYCLING", "drive": "DRIVING"}


def _google_step(s: RouteStep, mode: str) -> dict[str, Any]:
    street = f"<b>{s.street}</b>" if s.street else ""
    text = s.instruction.replace(s.street, street) if s.street else s.instruction
    step = {
        "distance": {"text": _text_distance(s.distance_m), "value": round(s.distance_m)},
        "duration": {"text": _text_duration(s.duration_s), "value": round(s.duration_s)},
        "start_location": _latlng(s.start.lat, s.start.lon),
        "end_location": _latlng(s.end.lat, s.end.lon),
        "html_instructions": text,
        "polyline": {"points": encode_polyline(s.geometry)},
        "travel_mode": _GOOGLE_MODE[mode],
    }
    if s.maneuver not in ("depart", "straight"):
        step["maneuver"] = s.maneuver
    return step


def google_directions(route: Any) -> dict[str, Any]:
    r = _as(Route, route)
    pts = r.geometry()
    lats, lons = [p[0] for p in pts], [p[1] for p in pts]
    legs = [
        {
            "distance": {"text": _text_distance(leg.distance_m), "value": round(leg.distance_m)},
            "duration": {"text": _text_duration(leg.duration_s), "value": round(leg.duration_s)},
            "start_location": _latlng(leg.start.lat, leg.start.lon),
            "end_location": _latlng(leg.end.lat, leg.end.lon),
            "start_address": "",
            "end_address": "",
            "steps": [_google_step(s, r.mode) for s in leg.steps],
        }
        for leg in r.legs
    ]
    named = [s.street for leg in r.legs for s in sorted(leg.steps, key=lambda s: -s.distance_m) if s.street]
    return {
        "status": "OK",
        "geocoded_waypoints": [{"geocoder_status": "OK"} for _ in range(len(r.legs) + 1)],
        "routes": [
            {
                "summary": " and ".join(dict.fromkeys(named[:2])),
                "legs": legs,
                "overview_polyline": {"points": encode_polyline(pts)},
                "bounds": {"northeast": _latlng(max(lats), max(lons)), "southwest": _latlng(min(lats), min(lons))},
                "warnings": [],
                "waypoint_order": list(range(len(r.legs) - 1)),
                "copyrights": "Map data © OpenStreetMap contributors (offline map pack)",
            }
        ],
    }


# -- AMap ----------------------------------------------------------------------------------------------

_AMAP_OK = {"status": "1", "info": "OK", "infocode": "10000"}
_AMAP_ORIENT = {
    "north": "北",
    "northeast": "东北",
    "east": "东",
    "southeast": "东南",
    "south": "南",
    "southwest": "西南",
    "west": "西",
    "northwest": "西北",
}
_AMAP_ACTION = {
    "turn-left": "左转",
    "turn-right": "右转",
    "turn-slight-left": "向左前方行驶",
    "turn-slight-right": "向右前方行驶",
    "turn-sharp-left": "向左后方行驶",
    "turn-sharp-right": "向右后方行驶",
    "uturn-left": "左转调头",
    "uturn-right": "左转调头",
    "straight": "直行",
}
_AMAP_VERB = {"walk": "步行", "bike": "骑行", "drive": "行驶"}


def amap_error(info: str, infocode: str = "20000") -> dict[str, Any]:
    """AMap's failure shape (e.g. INVALID_PARAMS = 20000)."""
    return {"status": "0", "info": info, "infocode": infocode}


def _amap_poi(p: Place, distance_m: float | None = None) -> dict[str, Any]:
    row = {
        "id": p.place_id,
        "name": p.name,
        "type": ";".join(x for x in (p.category_key, p.category) if x),
        "typecode": "",
        "address": p.address or "",
        "location": _lonlat(p.lat, p.lon),
        "pname": "",
        "cityname": p.city or "",
        "adname": "",
    }
    if distance_m is not None:
        row["distance"] = str(round(distance_m))
    return row


def amap_place_text(results: list[Any]) -> dict[str, Any]:
    """v3/place/text (keyword search) shape from geocode results."""
    pois = [_amap_poi(_as(GeocodeResult, r)) for r in results]
    return {**_AMAP_OK, "count": str(len(pois)), "pois": pois}


def amap_place_around(results: list[Any]) -> dict[str, Any]:
    """v3/place/around shape: POIs with a distance string, nearest first."""
    rows = [_as(NearbyResult, r) for r in results]
    pois = [_amap_poi(p, p.distance_m) for p in rows]
    return {**_AMAP_OK, "count": str(len(pois)), "pois": pois}


def amap_regeo(result: Any) -> dict[str, Any]:
    r = _as(ReverseGeocodeResult, result)
    number = (r.nearest.housenumber or "") if r.nearest and r.nearest.kind == "address" else ""
    return {
        **_AMAP_OK,
        "regeocode": {
            "formatted_address": r.address or "",
            "addressComponent": {
                "country": "",
                "province": "",
                "city": r.city or "",
                "district": "",
                "township": "",
                "streetNumber": {
                    "street": r.street or "",
                    "number": number,
                    "distance": "" if r.street_distance_m is None else str(round(r.street_distance_m)),
                },
            },
            "pois": [_amap_poi(r.nearest, r.distance_m)] if r.nearest and r.nearest.kind == "poi" else [],
        },
    }


def amap_direction(route: Any) -> dict[str, Any]:
    """v5/direction/{driving,walking,bicycling} shape: one path, string numbers, "lon,lat;..." polylines.
    AMap's `action` is what to do at the end of a step, i.e. the next step's maneuver."""
    r = _as(Route, route)
    steps = [s for leg in r.legs for s in leg.steps]
    out_steps = []
    for i, s in enumerate(steps):
        nxt = steps[i + 1].maneuver if i + 1 < len(steps) else "arrive"
        orient = _AMAP_ORIENT[compass(s.bearing_deg)]
        road = s.street or "无名道路"
        out_steps.append(
            {
                "instruction": (f"沿{s.street}" if s.street else "")
                + f"向{orient}{_AMAP_VERB[r.mode]}{round(s.distance_m)}米"
                + _AMAP_ACTION.get(nxt, ""),
                "orientation": orient,
                "road_name": road,
                "step_distance": str(round(s.distance_m)),
                "cost": {"duration": str(round(s.duration_s))},
                "polyline": ";".join(_lonlat(lat, lon) for lat, lon in s.geometry),
                "action": _AMAP_ACTION.get(nxt, ""),
                "assistant_action": "到达目的地" if nxt == "arrive" else "",
            }
        )
    first, last = r.legs[0].start, r.legs[-1].end
    tolls = sum(s.distance_m for s in steps if "toll" in s.flags)
    return {
        **_AMAP_OK,
        "count": "1",
        "route": {
            "origin": _lonlat(first.lat, first.lon),
            "destination": _lonlat(last.lat, last.lon),
            "paths": [
                {
                    "distance": str(round(r.distance_m)),
                    "restriction": "0",
                    "cost": {
                        "duration": str(round(r.duration_s)),
                        "tolls": "0",
                        "toll_distance": str(round(tolls)),
                        "traffic_lights": "0",
                    },
                    "steps": out_steps,
                }
            ],
        },
    }


def mobility_envelope(ok: bool, data: Any = None, error: str | None = None) -> dict[str, Any]:
    """MobilityBench sandbox result: status 0 = SUCCESS, 1 = FAILED."""
    return {"status": 0 if ok else 1, "data": data if data is not None else {}, "error": None if ok else error}


def mobility_query_poi(results: list[Any]) -> dict[str, Any]:
    """query_poi payload: the first match as {location, name, address}."""
    if not results:
        return mobility_envelope(False, error="POI not found")
    p = _as(GeocodeResult, results[0])
    return mobility_envelope(True, {"location": _lonlat(p.lat, p.lon), "name": p.name, "address": p.address or ""})


def mobility_search_around(results: list[Any]) -> dict[str, Any]:
    rows = [_as(NearbyResult, r) for r in results]
    if not rows:
        return mobility_envelope(False, error="no POI found around this location")
    return mobility_envelope(
        True,
        [
            {
                "name": p.name,
                "location": _lonlat(p.lat, p.lon),
                "address": p.address or "",
                "type": ";".join(x for x in (p.category_key, p.category) if x),
                "distance": str(round(p.distance_m)),
            }
            for p in rows
        ],
    )


def mobility_reverse_geocoding(result: Any) -> dict[str, Any]:
    r = _as(ReverseGeocodeResult, result)
    if not r.address:
        return mobility_envelope(False, error="no address at this location")
    return mobility_envelope(True, {"address": r.address})


# -- GeoRover (EVGeoQA) ---------------------------------------------------------------------------------

_STATION_TYPE = "汽车服务;充电站;充电站"


def _meters(m: float) -> str:
    return f"{round(m)} meters"


def georover_stations(results: list[Any], origin_lat: float, origin_lon: float) -> list[dict[str, Any]]:
    """Search_Stations records; distances are WGS84 geodesic, as EVGeoQA's ground truth is."""
    out = []
    for x in results:
        p = _as(NearbyResult, x)
        out.append(
            {
                "address": p.address or "",
                "coord": _lonlat(p.lat, p.lon),
                "station_distance": _meters(geodesic_m(origin_lat, origin_lon, p.lat, p.lon)),
                "station_name": p.name,
                "tag": [],
                "type": _STATION_TYPE,
            }
        )
    return out


def georover_pois(results: list[Any], origin_lat: float, origin_lon: float, cap: int = 20) -> list[dict[str, Any]]:
    """Search_Nearby_POI records (the upstream data caps the list at 20)."""
    out = []
    for x in results[:cap]:
        p = _as(NearbyResult, x)
        out.append(
            {
                "address": p.address or "",
                "poi_distance": _meters(geodesic_m(origin_lat, origin_lon, p.lat, p.lon)),
                "poi_name": p.name,
                "tag": [],
                "type": ";".join(x for x in (p.category_key, p.category) if x),
            }
        )
    return out


def georover_distance(distance_m: float) -> dict[str, str]:
    return {"distance": _meters(distance_m)}


def georover_move(lat: float, lon: float, distance_m: float, direction: str) -> dict[str, list[float]]:
    """Change_Current_Location: equirectangular step N/S/E/W; returns [lon, lat] as the tool does."""
    north, east = {"N": (1, 0), "S": (-1, 0), "E": (0, 1), "W": (0, -1)}[direction.strip().upper()]
    new_lat, new_lon = offset(lat, lon, north * distance_m, east * distance_m)
    return {"new_location": [round(new_lon, 6), round(new_lat, 6)]}


def plain(data: Any) -> Any:
    """Plain records: the rig's own JSON (pydantic dumps), for agents without a provider dialect."""
    if hasattr(data, "model_dump"):
        return data.model_dump(mode="json")
    if isinstance(data, list):
        return [plain(x) for x in data]
    return data


__all__ = [
    "amap_direction",
    "amap_error",
    "amap_place_around",
    "amap_place_text",
    "amap_regeo",
    "georover_distance",
    "georover_move",
    "georover_pois",
    "georover_stations",
    "google_directions",
    "google_error",
    "google_geocode",
    "google_nearby",
    "google_reverse_geocode",
    "google_status",
    "mobility_envelope",
    "mobility_query_poi",
    "mobility_reverse_geocoding",
    "mobility_search_around",
    "plain",
]
