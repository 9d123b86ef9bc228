"""RouteEval prompt packs: the paper's distribution, the Helsinki pack's feasibility, loader errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rig.benchmarks.base import DataError
from rig.benchmarks.routeeval.benchmark import RouteEval
from rig.benchmarks.routeeval.data import load_prompt_pack
from rig.benchmarks.routeeval.scoring import accuracy

DATA = RouteEval.default_data()


def test_us50_has_the_paper_distribution() -> None:
    pp = load_prompt_pack(DATA / "us50.yaml")
    ps = pp.prompts
    assert len(ps) == 50
    assert Counter(p.region for p in ps) == {"US": 28, "international": 10, "generic": 12}
    assert Counter(p.route_type for p in ps) == {"loop": 38, "out-and-back": 8, "point-to-point": 4}
    assert min(p.target_miles for p in ps) == 2.0 and max(p.target_miles for p in ps) == 13.1
    assert set(Counter(p.category for p in ps)) == {"simple", "moderate", "complex"}
    assert set(Counter(p.style for p in ps)) == {"simple", "terrain", "landmark", "multi"}
    # the ten international cities the paper lists
    intl = {p.city.split(",")[0] for p in ps if p.region == "international"}  # type: ignore[union-attr]
    assert intl == {
        "Paris",
        "Tokyo",
        "Rome",
        "London",
        "Barcelona",
        "Singapore",
        "Sydney",
        "Berlin",
        "Vancouver",
        "Banff",
    }
    lengths = Counter(pp.length_of(p.target_miles) for p in ps)
    assert lengths["short"] > 0 and lengths["long"] > 0


def test_helsinki_pack_is_modest_and_mixed() -> None:
    pp = load_prompt_pack(DATA / "helsinki.yaml")
    assert 8 <= len(pp.prompts) <= 12
    assert {p.city for p in pp.prompts} == {"Helsinki"}
    assert set(p.route_type for p in pp.prompts) == {"loop", "out-and-back", "point-to-point"}
    assert set(p.category for p in pp.prompts) == {"simple", "moderate", "complex"}
    assert {pp.length_of(p.target_miles) for p in pp.prompts} >= {"short", "long"}
    assert all(p.reference for p in pp.prompts)


@pytest.fixture(scope="module")
def helsinki_validator(helsinki_pack: Path):  # type: ignore[no-untyped-def]
    from rig.benchmarks.routeeval.validate import RouteValidator, Site
    from rig.maps.query import MapPack

    pp = load_prompt_pack(DATA / "helsinki.yaml")
    return pp, RouteValidator([Site("helsinki", MapPack.open(helsinki_pack))], pp.aliases)


def test_every_helsinki_place_and_alias_resolves_exactly(helsinki_validator) -> None:  # type: ignore[no-untyped-def]
    pp, v = helsinki_validator
    names = {n for p in pp.prompts for n in p.reference} | set(pp.aliases.values())
    for n in sorted(names):
        g = v.geocode(0, n, "Helsinki")
        assert g is not None and g.match == "exact", n
    for alias, target in pp.aliases.items():
        g = v.geocode(0, alias, "Helsinki")
        assert g is not None and g.name == target, alias


def test_every_helsinki_prompt_is_feasible_on_the_map(helsinki_validator) -> None:  # type: ignore[no-untyped-def]
    """Each prompt's reference route realises its target within 10%: the targets fit the extract. The pack's
    reference routes list a loop's or out-and-back's places once, so they are measured closed."""
    pp, v = helsinki_validator
    for p in pp.prompts:
        m = v.measure(p.route_type, p.reference, p.city, closed=True)
        assert m.ok, (p.id, m.error)
        assert accuracy(m.miles, p.target_miles) >= 0.9, (p.id, m.miles, p.target_miles)


def _write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "pack.yaml"
    f.write_text(text, encoding="utf-8")
    return f


GOOD = """name: t
prompts:
  - {id: a, text: "2 mile loop", target_miles: 2, route_type: loop, city: Helsinki, region: international,
     category: simple, style: simple}
"""


def test_loader_accepts_a_minimal_pack(tmp_path: Path) -> None:
    pp = load_prompt_pack(_write(tmp_path, GOOD))
    assert pp.prompts[0].id == "a" and pp.length_of(2) == "short" and pp.length_of(6) == "other"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace("route_type: loop", "route_type: circuit"), "prompts.0 (id a).route_type"),
        (GOOD.replace("target_miles: 2", "target_miles: -2"), "prompts.0 (id a).target_miles"),
        (GOOD.replace("city: Helsinki, region: international", "city: Helsinki, region: generic"), "generic prompts"),
        (GOOD.replace("style: simple}", "style: simple, colour: red}"), "colour"),
        (GOOD + GOOD.split("prompts:\n")[1], "duplicate prompt id 'a'"),
        ("name: t\nprompts: []\n", "prompts"),
        ("- just a list\n", "a prompt pack is a mapping"),
        ("name: [unclosed\n", "not readable as YAML"),
    ],
)
def test_loader_errors_name_file_and_field(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(DataError) as exc:
        load_prompt_pack(_write(tmp_path, text))
    assert "pack.yaml" in str(exc.value) and needle in str(exc.value)


def test_missing_pack_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        load_prompt_pack(tmp_path / "nope.yaml")
