"""Small geodesy helpers. Every function takes and returns (lat, lon) in degrees, in that order."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

# IUGG mean Earth radius: the usual choice for haversine ("great circle") distances.
EARTH_RADIUS_M = 6_371_008.8
# WGS84 ellipsoid, for geodesic distances (EVGeoQA's ground truth is geodesic, not haversine).
_WGS84_A = 6_378_137.0
_WGS84_F = 1 / 298.257223563
_WGS84_B = _WGS84_A * (1 - _WGS84_F)


def haversine_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in metres on the mean sphere."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(h)))


def haversine_many_m(lat: float, lon: float, lats: np.ndarray, lons: np.ndarray) -> np.ndarray:
    """Vectorised great-circle distance from one point to many."""
    p1, p2 = np.radians(lat), np.radians(lats)
    dp, dl = p2 - p1, np.radians(lons - lon)
    h = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_M * np.arcsin(np.minimum(1.0, np.sqrt(h)))


def geodesic_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """WGS84 ellipsoidal distance (Vincenty inverse); falls back to haversine where it does not converge
    (nearly antipodal points), which never happens at city scale."""
    if lat1 == lat2 and lon1 == lon2:
        return 0.0
    a, b, f = _WGS84_A, _WGS84_B, _WGS84_F
    L = math.radians(lon2 - lon1)
    U1 = math.atan((1 - f) * math.tan(math.radians(lat1)))
    U2 = math.atan((1 - f) * math.tan(math.radians(lat2)))
    sinU1, cosU1, sinU2, cosU2 = math.sin(U1), math.cos(U1), math.sin(U2), math.cos(U2)
    lam = L
    for _ in range(200):
        sin_lam, cos_lam = math.sin(lam), math.cos(lam)
        sin_sigma = math.hypot(cosU2 * sin_lam, cosU1 * sinU2 - sinU1 * cosU2 * cos_lam)
        if sin_sigma == 0:
            return 0.0
        cos_sigma = sinU1 * sinU2 + cosU1 * cosU2 * cos_lam
        sigma = math.atan2(sin_sigma, cos_sigma)
        sin_alpha = cosU1 * cosU2 * sin_lam / sin_sigma
        cos2_alpha = 1 - sin_alpha**2
        cos_2sm = cos_sigma - 2 * sinU1 * sinU2 / cos2_alpha if cos2_alpha else 0.0
        C = f / 16 * cos2_alpha * (4 + f * (4 - 3 * cos2_alpha))
        prev = lam
        lam = L + (1 - C) * f * sin_alpha * (sigma + C * sin_sigma * (cos_2sm + C * cos_sigma * (-1 + 2 * cos_2sm**2)))
        if abs(lam - prev) < 1e-12:
            break
    else:
        return haversine_m(lat1, lon1, lat2, lon2)
    u2 = cos2_alpha * (a * a - b * b) / (b * b)
    A = 1 + u2 / 16384 * (4096 + u2 * (-768 + u2 * (320 - 175 * u2)))
    B = u2 / 1024 * (256 + u2 * (-128 + u2 * (74 - 47 * u2)))
    d_sigma = (
        B
        * sin_sigma
        * (
            cos_2sm
            + B
            / 4
            * (cos_sigma * (-1 + 2 * cos_2sm**2) - B / 6 * cos_2sm * (-3 + 4 * sin_sigma**2) * (-3 + 4 * cos_2sm**2))
        )
    )
    return b * A * (sigma - d_sigma)


def bearing_deg(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Initial bearing from point 1 to point 2, degrees clockwise from north in [0, 360)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dl = math.radians(lon2 - lon1)
    x = math.sin(dl) * math.cos(p2)
    y = math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) * math.cos(dl)
    return (math.degrees(math.atan2(x, y)) + 360.0) % 360.0


_COMPASS = ("north", "northeast", "east", "southeast", "south", "southwest", "west", "northwest")


def compass(bearing: float) -> str:
    return _COMPASS[int(((bearing % 360) + 22.5) // 45) % 8]


def to_xyz(lats: ArrayLike, lons: ArrayLike) -> np.ndarray:
    """Points on the unit sphere, so a KD-tree's Euclidean (chord) distance is monotone in true distance
    everywhere, poles and the antimeridian included."""
    la, lo = np.radians(np.asarray(lats, float)), np.radians(np.asarray(lons, float))
    return np.column_stack((np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)))


def metres_to_chord(m: float) -> float:
    return 2.0 * math.sin(min(m, math.pi * EARTH_RADIUS_M) / (2.0 * EARTH_RADIUS_M))


def offset(lat: float, lon: float, north_m: float, east_m: float) -> tuple[float, float]:
    """Equirectangular step, fine for the short moves an agent asks for (EVGeoQA's ChangeLocation)."""
    dlat = north_m / EARTH_RADIUS_M * 180 / math.pi
    dlon = east_m / (EARTH_RADIUS_M * math.cos(math.radians(lat))) * 180 / math.pi
    return lat + dlat, lon + dlon


def encode_polyline(points: list[tuple[float, float]], precision: int = 5) -> str:
    """Google's encoded polyline format for a list of (lat, lon)."""
    factor = 10**precision
    out: list[str] = []
    prev_lat = prev_lon = 0
    for lat, lon in points:
        ilat, ilon = round(lat * factor), round(lon * factor)
        for delta in (ilat - prev_lat, ilon - prev_lon):
            v = ~(delta << 1) if delta < 0 else delta << 1
            while v >= 0x20:
                out.append(chr((0x20 | (v & 0x1F)) + 63))
                v >>= 5
            out.append(chr(v + 63))
        prev_lat, prev_lon = ilat, ilon
    return "".join(out)


def decode_polyline(text: str, precision: int = 5) -> list[tuple[float, float]]:
    factor = 10**precision
    points: list[tuple[float, float]] = []
    i = lat = lon = 0
    while i < len(text):
        vals = []
        for _ in range(2):
            shift = result = 0
            while True:
                b = ord(text[i]) - 63
                i += 1
                result |= (b & 0x1F) << shift
                shift += 5
                if b < 0x20:
                    break
            vals.append(~(result >> 1) if result & 1 else result >> 1)
        lat += vals[0]
        lon += vals[1]
        points.append((lat / factor, lon / factor))
    return points


def ring_area_m2(lats: np.ndarray, lons: np.ndarray) -> float:
    """Planar shoelace area on a local equirectangular projection (city-scale polygons)."""
    if len(lats) < 3:
        return 0.0
    k = math.cos(math.radians(float(np.mean(lats))))
    x = np.radians(lons) * EARTH_RADIUS_M * k
    y = np.radians(lats) * EARTH_RADIUS_M
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def point_in_ring(lat: float, lon: float, lats: np.ndarray, lons: np.ndarray) -> bool:
    """Even-odd ray casting in lat/lon space."""
    inside = False
    n = len(lats)
    j = n - 1
    for i in range(n):
        yi, yj, xi, xj = lats[i], lats[j], lons[i], lons[j]
        if (yi > lat) != (yj > lat) and lon < (xj - xi) * (lat - yi) / (yj - yi) + xi:
            inside = not inside
        j = i
    return inside
