from __future__ import annotations

import math

import pytest

from rig.maps.geo import (
    bearing_deg,
    compass,
    decode_polyline,
    encode_polyline,
    geodesic_m,
    haversine_m,
    offset,
    point_in_ring,
)
from rig.maps.text import normalise_name


def test_haversine_one_degree_of_latitude() -> None:
    assert haversine_m(0, 0, 1, 0) == pytest.approx(111_195.08, abs=0.5)


def test_geodesic_matches_evgeoqa_ground_truth() -> None:
    # EVGeoQA README example: user [30.573871636176943, 120.37401098079212] -> station [30.440093, 120.304083]
    d = geodesic_m(30.573871636176943, 120.37401098079212, 30.440093, 120.304083)
    assert d / 1000 == pytest.approx(16.27918236, abs=1e-5)
    assert haversine_m(30.573871636176943, 120.37401098079212, 30.440093, 120.304083) / 1000 == pytest.approx(
        16.31444, abs=1e-4
    )


def test_offset_matches_reference_example() -> None:
    lat, lon = offset(35.189944, 118.292622, 500, 0)
    assert (round(lat, 6), round(lon, 6)) == (35.194441, 118.292622)
    lat, lon = offset(35.189944, 118.292622, 0, 500)
    assert (round(lat, 6), round(lon, 6)) == (35.189944, 118.298124)


def test_polyline_roundtrip_and_known_encoding() -> None:
    pts = [(38.5, -120.2), (40.7, -120.95), (43.252, -126.453)]
    assert encode_polyline(pts) == "_p~iF~ps|U_ulLnnqC_mqNvxq`@"
    assert decode_polyline(encode_polyline(pts)) == pts


def test_bearing_and_compass() -> None:
    assert bearing_deg(60, 24, 61, 24) == pytest.approx(0, abs=1e-9)
    assert compass(bearing_deg(60, 24, 60, 25)) == "east"
    assert math.isclose(bearing_deg(0, 0, 0, -1), 270)


def test_point_in_ring() -> None:
    import numpy as np

    lats, lons = np.array([0, 0, 1, 1.0]), np.array([0, 1, 1, 0.0])
    assert point_in_ring(0.5, 0.5, lats, lons)
    assert not point_in_ring(1.5, 0.5, lats, lons)


def test_normalise_name() -> None:
    assert normalise_name("  Café\u00a0 EKBERG ") == "café ekberg"
    assert normalise_name("Cafe\u0301 Ekberg") == normalise_name("Café Ekberg")
    assert normalise_name("ＡＢＣ") == "abc"  # NFKC folds full-width forms
