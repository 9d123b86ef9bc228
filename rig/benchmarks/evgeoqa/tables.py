"""EVGeoQA's report tables from stored results only: Hits@K by distance tier (the paper's Table 2), location changes
(Table 3), error causes (sec. 5.5) and what data the run held; tier bounds and radii come from the result tags."""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import Any

from rig.benchmarks.base import Table
from rig.benchmarks.evgeoqa.data import Setting
from rig.benchmarks.evgeoqa.scoring import CAUSES, KS
from rig.records import EpisodeResult


def _tier_labels(results: list[EpisodeResult]) -> tuple[str, str, str]:
    for r in results:
        t = r.tags.get("tiers_m")
        if t:
            a, b = (float(x) for x in t.split(","))
            return Setting(search_radius_m=a / 2, walk_radius_m=1, tiers_m=(a, b)).tier_labels()
    return Setting.paper().tier_labels()


def _in_tier(r: EpisodeResult, t: int) -> bool:
    """Cumulative tiers as in the paper's Table 2: < first, < second, everything."""
    try:
        return int(r.tags.get("tier", "3")) <= t
    except ValueError:
        return t == 3


def _mean(rs: list[EpisodeResult], key: str) -> float | None:
    vals = [r.scores.get(key) or 0.0 for r in rs]
    return mean(vals) if vals else None


def evgeoqa_tables(results: list[EpisodeResult], label: str) -> list[Table]:
    if not results:
        return []
    by_city: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by_city[r.tags.get("city", "?")].append(r)
    groups = sorted(by_city.items())
    if len(groups) > 1:
        groups.append(("All", list(results)))
    rows = [_city_rows(city, rs, label) for city, rs in groups]
    t2_rows, t3_rows, err_rows, data_rows = (list(column) for column in zip(*rows, strict=True))
    repeats = max(r.repeat for r in results) + 1
    failed = sum(r.status == "failed" for r in results)
    return _tables(_tier_labels(results), repeats, failed, t2_rows, t3_rows, err_rows, data_rows)


def _city_rows(city: str, rs: list[EpisodeResult], label: str) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """One city's (or All's) rows of the four tables: Hits@K per tier, location changes per tier, error causes,
    data counts."""
    row: list[Any] = [city, label]
    calls: list[Any] = [city, label]
    counts: list[Any] = [city]
    for t in (1, 2, 3):
        sub = [r for r in rs if _in_tier(r, t)]
        row += [_mean(sub, f"hits@{k}") for k in KS]
        calls.append(_mean(sub, "change_location"))
        counts.append(len({r.episode_id for r in sub}))
    eps = {r.episode_id: r for r in rs}
    counts.append(sum(r.tags.get("reachable") == "true" for r in eps.values()))
    first = rs[0].tags
    counts += [first.get("search_radius_m"), first.get("walk_radius_m"), first.get("max_steps")]
    bad = [r for r in rs if r.error_category]
    err = [city, label, len(rs), len(bad)] + [sum(r.error_category == c for r in bad) for c in CAUSES]
    err.append(sum(r.error_category == "engine_error" for r in bad))
    err += [int(sum(r.scores.get(k) or 0 for r in rs)) for k in ("argument_errors", "out_of_area", "format_errors")]
    return row, calls, err, counts


def _tables(
    labels: tuple[str, str, str],
    repeats: int,
    failed: int,
    t2_rows: list[list[Any]],
    t3_rows: list[list[Any]],
    err_rows: list[list[Any]],
    data_rows: list[list[Any]],
) -> list[Table]:
    note = (
        f"Tiers are cumulative (as in the paper): the geodesic distance from the user to the best ground-truth "
        f"station is below the first bound, below the second, or anything; bounds are 2x and 4x the search "
        f"radius (the paper's 10 / 20 km for 5 km). Repeats: {repeats}. A blank cell: no episode in that tier."
    )
    if failed:
        note += f" {failed} episode(s) failed in the engine and count as misses."
    cols = ["City", "Model"] + [f"{lab} Hits@{k}" for lab in labels for k in KS]
    return [
        Table(
            title="EVGeoQA Hits@K by distance tier (layout of the paper's Table 2)",
            columns=cols,
            rows=t2_rows,
            note=note + " A hit: any of the first K answers is a ground-truth station (or on its site, 50 m).",
        ),
        Table(
            title="Average Change_Current_Location calls per episode (layout of the paper's Table 3)",
            columns=["City", "Model", *labels],
            rows=t3_rows,
            note="Every invocation counts, refused ones (out of the map, bad arguments) included.",
        ),
        Table(
            title="EVGeoQA error causes (paper sec. 5.5, appendix A.4)",
            columns=[
                "City",
                "Model",
                "Episodes",
                "Failed (no hit in 3)",
                *CAUSES,
                "engine_error",
                "Argument-error calls",
                "Out-of-area calls",
                "Format errors",
            ],
            rows=err_rows,
            note="First applicable cause per failed episode: format_error (re-prompt budget spent), max_tool_calls "
            "(step budget spent), hallucinated_station (names a station no search returned), "
            "factual_conflation (the evidence for a ground-truth station was retrieved), argument_error "
            "(malformed or out-of-area tool calls), insufficient_exploration (answered before finding a "
            "valid station). The last three columns count calls / replies over all episodes.",
        ),
        Table(
            title="EVGeoQA data",
            columns=[
                "City",
                f"Queries {labels[0]}",
                f"Queries {labels[1]}",
                "Queries (all)",
                "Reachable without moving",
                "Search radius (m)",
                "Walk radius (m)",
                "Step budget",
            ],
            rows=data_rows,
            note="Queries counted in this run's results; radii as recorded in the episodes (scaled to the "
            "pack's extent for generated data, see the README).",
        ),
    ]
