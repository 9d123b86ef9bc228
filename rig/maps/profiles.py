"""Which OSM ways each travel mode may use, in which direction, how fast, and which avoid flags they carry.

Deliberately simple rules (no turn restrictions, no time-dependent access): enough for city-scale
evaluation answers, documented in docs/maps.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

WALK, BIKE, DRIVE = 1, 2, 4
MODE_BITS = {"walk": WALK, "bike": BIKE, "drive": DRIVE}

# Edge flags, kept in the pack so avoid options need no rebuild.
TOLL, HIGHWAY, FERRY, STEPS, UNPAVED, INDOOR, TUNNEL = 1, 2, 4, 8, 16, 32, 64
FLAG_NAMES = {
    TOLL: "toll",
    HIGHWAY: "highway",
    FERRY: "ferry",
    STEPS: "steps",
    UNPAVED: "unpaved",
    INDOOR: "indoor",
    TUNNEL: "tunnel",
}
# Avoid option -> flags. "highways" means motorway/trunk (Google's avoid=highways, AMap's 不走高速).
AVOID_FLAGS = {
    "tolls": TOLL,
    "highways": HIGHWAY,
    "ferries": FERRY,
    "steps": STEPS,
    "unpaved": UNPAVED,
    "indoor": INDOOR,
    "tunnels": TUNNEL,
}

_DRIVE_KMH = {
    "motorway": 100,
    "motorway_link": 60,
    "trunk": 80,
    "trunk_link": 50,
    "primary": 50,
    "primary_link": 40,
    "secondary": 50,
    "secondary_link": 40,
    "tertiary": 40,
    "tertiary_link": 30,
    "unclassified": 40,
    "residential": 30,
    "living_street": 10,
    "service": 15,
    "road": 30,
}
_BIKEABLE = {
    "cycleway",
    "path",
    "track",
    "living_street",
    "residential",
    "service",
    "unclassified",
    "tertiary",
    "tertiary_link",
    "secondary",
    "secondary_link",
    "primary",
    "primary_link",
    "trunk",
    "trunk_link",
    "road",
}
# Feet go wherever bikes go by default, and on the ways for feet only.
_WALKABLE = _BIKEABLE | {"footway", "pedestrian", "steps", "corridor", "platform", "trail", "bridleway", "elevator"}
_UNPAVED = {
    "unpaved",
    "gravel",
    "dirt",
    "earth",
    "grass",
    "ground",
    "mud",
    "sand",
    "fine_gravel",
    "compacted",
    "pebblestone",
    "woodchips",
}
_YES = {"yes", "designated", "permissive", "official", "destination"}
_NO = {"no", "private", "agricultural", "forestry", "delivery", "customers", "discouraged"}

WALK_MPS = 5.0 / 3.6
BIKE_MPS = 15.0 / 3.6
DISMOUNT_MPS = 5.0 / 3.6
FERRY_MPS = 15.0 / 3.6
DRIVE_ACCESS_MPS = 10.0 / 3.6  # from a waypoint to the nearest drivable node (parking lot pace)
BASE_MPS = {"walk": WALK_MPS, "bike": BIKE_MPS, "drive": DRIVE_ACCESS_MPS}

_NUM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(mph|km/h|kmh)?\s*$")
_ZONE_KMH = {"urban": 50, "rural": 80, "motorway": 120, "living_street": 20, "walk": 7}


def parse_maxspeed(value: str | None) -> float | None:
    if not value:
        return None
    m = _NUM.match(value)
    if m:
        kmh = float(m.group(1))
        return kmh * 1.609344 if m.group(2) == "mph" else kmh
    zone = value.split(":")[-1]  # "FI:urban", "DE:zone30" ...
    if zone.startswith("zone") and zone[4:].isdigit():
        return float(zone[4:])
    return _ZONE_KMH.get(zone)


def _allowed(tags: Mapping[str, str], keys: tuple[str, ...], default: bool) -> bool:
    """The most specific access tag present wins (keys go from general to specific)."""
    verdict = default
    for key in keys:
        v = tags.get(key)
        if v in _YES:
            verdict = True
        elif v in _NO:
            verdict = False
    return verdict


def _oneway(tags: Mapping[str, str], key: str = "oneway") -> int:
    """1 forward only, -1 backward only, 0 both ways, 2 not usable (reversible/alternating)."""
    v = tags.get(key)
    if v in ("yes", "true", "1"):
        return 1
    if v in ("-1", "reverse"):
        return -1
    if v in ("reversible", "alternating"):
        return 2
    if v in ("no", "false", "0"):
        return 0
    if key == "oneway" and (
        tags.get("junction") in ("roundabout", "circular") or tags.get("highway") in ("motorway", "motorway_link")
    ):
        return 1
    return 0


def way_modes(tags: Mapping[str, str]) -> tuple[int, int] | None:
    """(forward mode bits, backward mode bits) for a way, or None if no mode may use it."""
    hw = tags.get("highway")
    ferry = tags.get("route") == "ferry"
    if hw is None and not ferry:
        return None
    if tags.get("area") == "yes" and hw not in ("pedestrian", "footway"):
        return None

    walk = (hw in _WALKABLE or ferry) and _allowed(tags, ("access", "foot"), True)
    if hw in ("motorway", "motorway_link") or tags.get("foot") in _NO:
        walk = walk and tags.get("foot") in _YES
    bike_default = hw in _BIKEABLE or ferry
    bike = (bike_default or tags.get("bicycle") in _YES) and _allowed(tags, ("access", "vehicle", "bicycle"), True)
    if hw in ("footway", "pedestrian", "steps", "corridor", "platform", "elevator") and tags.get("bicycle") not in _YES:
        bike = False
    drive_default = hw in _DRIVE_KMH or (ferry and tags.get("motor_vehicle") in _YES | {"yes"})
    drive = drive_default and _allowed(tags, ("access", "vehicle", "motor_vehicle", "motorcar"), True)
    if tags.get("service") in ("emergency_access",):
        drive = False

    fwd = bwd = 0
    ow = _oneway(tags)
    if walk:
        # Pedestrians ignore oneway except where explicitly tagged for them.
        ow_foot = _oneway(tags, "oneway:foot")
        fwd |= WALK if ow_foot in (0, 1) else 0
        bwd |= WALK if ow_foot in (0, -1) else 0
    if bike:
        ow_bike = _oneway(tags, "oneway:bicycle") if "oneway:bicycle" in tags else ow
        if tags.get("cycleway", "").startswith("opposite") or tags.get("cycleway:both", "").startswith("opposite"):
            ow_bike = 0
        fwd |= BIKE if ow_bike in (0, 1) else 0
        bwd |= BIKE if ow_bike in (0, -1) else 0
    if drive:
        fwd |= DRIVE if ow in (0, 1) else 0
        bwd |= DRIVE if ow in (0, -1) else 0
    if not (fwd or bwd):
        return None
    return fwd, bwd


def way_flags(tags: Mapping[str, str]) -> int:
    hw = tags.get("highway", "")
    flags = 0
    if tags.get("toll") in ("yes", "true") or any(k.startswith("toll:") and v == "yes" for k, v in tags.items()):
        flags |= TOLL
    if hw in ("motorway", "motorway_link", "trunk", "trunk_link"):
        flags |= HIGHWAY
    if tags.get("route") == "ferry":
        flags |= FERRY
    if hw == "steps":
        flags |= STEPS
    if tags.get("surface") in _UNPAVED or hw == "track":
        flags |= UNPAVED
    if tags.get("indoor") not in (None, "no") or hw == "corridor":
        flags |= INDOOR
    if tags.get("tunnel") not in (None, "no"):
        flags |= TUNNEL
    return flags


def drive_kmh(tags: Mapping[str, str]) -> float:
    if tags.get("route") == "ferry":
        return FERRY_MPS * 3.6
    limit = parse_maxspeed(tags.get("maxspeed"))
    return limit if limit and limit > 0 else float(_DRIVE_KMH.get(tags.get("highway", ""), 30))


def walk_bike_mps(tags: Mapping[str, str]) -> tuple[float, float]:
    """(walking speed, cycling speed) along a way, in metres per second."""
    hw = tags.get("highway", "")
    if tags.get("route") == "ferry":
        return FERRY_MPS, FERRY_MPS
    walk = WALK_MPS * (0.5 if hw == "steps" else 1.0)  # stairs are slower than flat ground
    bike = DISMOUNT_MPS if hw in ("pedestrian", "footway", "steps") else BIKE_MPS
    return walk, bike
