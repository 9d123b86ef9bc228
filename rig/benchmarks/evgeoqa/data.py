"""EVGeoQA records: the radii of a world, stations, ground-truth answers and queries; intents and question templates.

Coordinates in these records are ``lat`` / ``lon`` fields. The upstream data writes ``[lat, lon]`` lists and its tools
take ``[lon, lat]``; both conversions happen at the edges (importer, tools), never here.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# The paper's radii (sec. 3.2, 4.1, 5.2): station search 5 km, walking 1 km, tiers at 2x and 4x the search radius.
PAPER_SEARCH_M = 5_000.0
PAPER_WALK_M = 1_000.0
# Extent diagonal at which the paper's radii apply unscaled: the search radius is a fifth of it. Smaller packs shrink
# every radius by diag / REFERENCE_DIAG_M, so their geometry keeps the paper's proportions (README: radii scaling).
REFERENCE_DIAG_M = 25_000.0
POI_CAP = 20  # the upstream POI lists hold the 20 nearest POIs of a station (notes C1.3)
GT_SIZE = 5  # up to five valid stations, ranked by driving distance (sec. 3.5)
SAME_SITE_M = 50.0  # two station records this close are one site (co-located phases share an answer)


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Setting(_Rec):
    """The radii a dataset was generated with; every episode carries them, and the tools use them."""

    search_radius_m: float  # Search_Stations
    walk_radius_m: float  # Search_Nearby_POI and the "walking distance" of a valid station
    poi_cap: int = POI_CAP
    gt_size: int = GT_SIZE
    scale: float = 1.0  # radii / paper radii (1.0 = the paper's)
    extent_diag_m: float | None = None
    tiers_m: tuple[float, float]  # the paper's 10 km / 20 km tiers: 2x and 4x the search radius
    distance: Literal["drive", "geodesic"] = "drive"  # Cal_Distance and the ranking of valid stations

    @classmethod
    def scaled(
        cls,
        extent_diag_m: float,
        search_radius_m: float | None = None,
        walk_radius_m: float | None = None,
        poi_cap: int = POI_CAP,
        gt_size: int = GT_SIZE,
    ) -> Setting:
        scale = min(1.0, extent_diag_m / REFERENCE_DIAG_M)
        search = float(search_radius_m) if search_radius_m is not None else round(PAPER_SEARCH_M * scale)
        walk = float(walk_radius_m) if walk_radius_m is not None else round(PAPER_WALK_M * scale)
        return cls(
            search_radius_m=search,
            walk_radius_m=walk,
            poi_cap=poi_cap,
            gt_size=gt_size,
            scale=round(scale, 6),
            extent_diag_m=round(extent_diag_m, 1),
            tiers_m=(2 * search, 4 * search),
        )

    @classmethod
    def paper(cls) -> Setting:
        return cls(
            search_radius_m=PAPER_SEARCH_M,
            walk_radius_m=PAPER_WALK_M,
            tiers_m=(10_000.0, 20_000.0),
            distance="geodesic",
        )

    def tier(self, distance_m: float) -> int:
        """1: under the first tier (paper < 10 km), 2: under the second (< 20 km), 3: beyond."""
        if distance_m < self.tiers_m[0]:
            return 1
        return 2 if distance_m < self.tiers_m[1] else 3

    def tier_labels(self) -> tuple[str, str, str]:
        def fmt(m: float) -> str:
            return f"{m / 1000:g} km" if m >= 1000 and m % 100 == 0 else f"{round(m)} m"

        return (f"<{fmt(self.tiers_m[0])}", f"<{fmt(self.tiers_m[1])}", "No Limit")


class Station(_Rec):
    station_id: str
    name: str
    lat: float
    lon: float
    address: str = ""


class AnswerStation(_Rec):
    """One ground-truth station: a valid station, its distances from the user, and the POIs that make it valid."""

    station_id: str
    name: str
    lat: float
    lon: float
    drive_m: float | None = None  # what the answer list is ranked by (geodesic for upstream data)
    geodesic_m: float
    poi_keys: list[str] = Field(default_factory=list)  # evidence: POI ids (generated) or names (upstream)
    poi_names: list[str] = Field(default_factory=list)


class Query(_Rec):
    id: str
    city: str
    question: str
    location_text: str = ""
    lat: float
    lon: float
    intent: str  # intent id (generated) or the upstream Question_poi category
    categories: list[str] = Field(default_factory=list)  # OSM key=value a POI must have (generated data)
    template: str = ""
    answers: list[AnswerStation]
    tier_distance_m: float  # geodesic distance from the user to the best (first) answer (sec. 5.2)
    reachable: bool = False  # an answer lies within the search radius of the user: no move is needed
    source: Literal["generated", "upstream"] = "generated"


class Dataset(_Rec):
    city: str
    setting: Setting
    stations: list[Station]
    queries: list[Query]
    notes: list[str] = Field(default_factory=list)  # what the generator or importer had to skip, and why


# -- intents ---------------------------------------------------------------------------------------------


class Intent(_Rec):
    id: str
    place: str  # the POI slot of the paper's seed templates ("a cafe")
    activities: list[str]  # functional mapping of the category to what the user wants to do (sec. 3.4, A.5)
    categories: list[str]  # OSM key=value


INTENTS: list[Intent] = [
    Intent(
        id="coffee",
        place="a cafe",
        activities=["grab a coffee", "have a coffee and a pastry"],
        categories=["amenity=cafe"],
    ),
    Intent(
        id="meal",
        place="a restaurant",
        activities=["have a proper sit-down meal", "eat dinner"],
        categories=["amenity=restaurant"],
    ),
    Intent(
        id="quick_bite",
        place="a fast-food place",
        activities=["grab a quick bite"],
        categories=["amenity=fast_food", "amenity=food_court"],
    ),
    Intent(
        id="drink",
        place="a pub or bar",
        activities=["have a drink", "have a beer with a friend"],
        categories=["amenity=pub", "amenity=bar", "amenity=biergarten"],
    ),
    Intent(
        id="cash",
        place="a bank",
        activities=["withdraw some cash", "sort something out at the bank"],
        categories=["amenity=bank", "amenity=atm"],
    ),
    Intent(
        id="overnight",
        place="a hotel",
        activities=["find somewhere to sleep tonight"],
        categories=["tourism=hotel", "tourism=hostel", "tourism=guest_house", "tourism=motel"],
    ),
    Intent(id="medicine", place="a pharmacy", activities=["pick up some medicine"], categories=["amenity=pharmacy"]),
    Intent(
        id="groceries",
        place="a grocery store",
        activities=["buy groceries"],
        categories=["shop=supermarket", "shop=convenience"],
    ),
    Intent(
        id="clothes",
        place="a clothing store",
        activities=["shop for clothes", "buy a new pair of shoes"],
        categories=["shop=clothes", "shop=shoes", "shop=department_store", "shop=mall"],
    ),
    Intent(
        id="haircut", place="a hair salon", activities=["get a haircut"], categories=["shop=hairdresser", "shop=beauty"]
    ),
    Intent(
        id="books",
        place="a bookshop or library",
        activities=["browse some books"],
        categories=["shop=books", "amenity=library"],
    ),
    Intent(
        id="workout",
        place="a sports centre",
        activities=["get a workout in"],
        categories=["leisure=sports_centre", "leisure=fitness_centre"],
    ),
    Intent(
        id="run",
        place="a stadium or park",
        activities=["go for a run"],
        categories=["leisure=stadium", "leisure=track", "leisure=park"],
    ),
    Intent(
        id="culture",
        place="a museum or gallery",
        activities=["see an exhibition"],
        categories=["tourism=museum", "tourism=gallery"],
    ),
    Intent(id="movie", place="a cinema", activities=["watch a movie"], categories=["amenity=cinema"]),
    Intent(id="show", place="a theatre", activities=["see a show"], categories=["amenity=theatre"]),
    Intent(
        id="doctor",
        place="a clinic",
        activities=["see a doctor or a dentist"],
        categories=["amenity=clinic", "amenity=doctors", "amenity=dentist"],
    ),
    Intent(id="post", place="a post office", activities=["send a parcel"], categories=["amenity=post_office"]),
    Intent(
        id="sports_gear",
        place="a sports shop",
        activities=["buy some sports gear"],
        categories=["shop=sports", "shop=outdoor", "shop=bicycle"],
    ),
    Intent(id="glasses", place="an optician", activities=["get my glasses fixed"], categories=["shop=optician"]),
]
INTENT_BY_ID = {i.id: i for i in INTENTS}

# The paper's seed templates (appendix A.2, English translations), slot = the POI category.
SEED_TEMPLATES = [
    "Help me find a charging station near {place}.",
    "I plan to go to {place} and charge my EV. Can you recommend a charging station?",
    "I am going to {place} to run some errands and want to charge my electric vehicle. Where would be a suitable "
    "place?",
    "Are there any charging stations near {place}?",
    "Can you show me the locations of charging stations in the area of {place}?",
    "Do you have any recommended charging stations near {place}?",
    "Please recommend the charging station closest to {place}.",
]
# Our own functional-mapping phrasings (the paper paraphrases seeds with an LLM into activity-style needs, A.5).
INTENT_TEMPLATES = [
    "My car needs charging and I'd like to {activity} while it charges. Where should I go?",
    "I want to {activity} and charge my EV at the same time. Can you recommend a charging station?",
    "Battery is getting low. Is there a charging station where I can {activity} within walking distance?",
    "While my electric car charges I want to {activity}. Which station would you suggest?",
    "Find me a charging station close enough to walk and {activity}.",
    "I need to charge my EV and I'd love to {activity} nearby. Any suggestions?",
]

# Not places anyone goes to "do something": transit stops, map furniture, parking and other stations.
NOISE_CATEGORIES = frozenset(
    {
        "highway=bus_stop",
        "railway=tram_stop",
        "railway=subway_entrance",
        "railway=station",
        "railway=halt",
        "railway=platform",
        "amenity=parking",
        "amenity=parking_entrance",
        "amenity=charging_station",
        "amenity=bicycle_parking",
        "amenity=vending_machine",
        "amenity=waste_basket",
        "amenity=bench",
        "amenity=recycling",
        "building=yes",
    }
)
NOISE_KEYS = frozenset({"public_transport", "place", "highway"})


def poi_categories(key: str | None, value: str | None) -> set[str]:
    """``key=value`` tags of a POI; multi-valued tags (``nightclub;restaurant``) give one per value."""
    if not key or not value:
        return set()
    return {f"{key}={v.strip()}" for v in value.split(";") if v.strip()}


def is_noise(key: str | None, value: str | None) -> bool:
    cats = poi_categories(key, value)
    return not cats or key in NOISE_KEYS or cats <= NOISE_CATEGORIES


def extent_diag_m(min_lat: float, min_lon: float, max_lat: float, max_lon: float) -> float:
    from rig.maps.geo import haversine_m

    return haversine_m(min_lat, min_lon, max_lat, max_lon)


def round_m(x: float) -> float:
    return float(round(x, 1)) if math.isfinite(x) else x
