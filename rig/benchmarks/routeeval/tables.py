"""Report tables in the layout of the paper's Tables 1-7, from stored results only (no map needed).

The paper's tables compare 13 models; a run holds one, so each table has that model's row (`rig compare` puts
runs side by side). Rates are over runs (prompt x repeat).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import mean, pstdev
from typing import TYPE_CHECKING, Any

from rig.benchmarks.base import Table
from rig.benchmarks.routeeval.scoring import ERRORS, HIGH, PERFECT
from rig.records import EpisodeResult

if TYPE_CHECKING:
    from rig.benchmarks.routeeval.data import PromptPack


def _acc(r: EpisodeResult) -> float:
    return float(r.scores.get("accuracy") or 0.0)


def _succ(r: EpisodeResult) -> bool:
    return bool(r.scores.get("success"))


def _measured(rs: list[EpisodeResult]) -> list[float]:
    return [float(v) for r in rs if (v := r.scores.get("d_actual_mi")) is not None]


def _pct(n: int, d: int) -> float | None:
    return n / d if d else None


def pc(x: float | None) -> str | None:
    """A rate as the paper prints it (91.1%); None stays None (the report prints a dash)."""
    return None if x is None else f"{100 * x:.1f}%"


def summary(rs: list[EpisodeResult]) -> dict[str, Any]:
    """The numbers behind Tables 1-4 and 6 for one set of runs."""
    n = len(rs)
    succ = sum(_succ(r) for r in rs)
    accs = [_acc(r) for r in rs]
    measured = [r for r in rs if r.scores.get("d_actual_mi") is not None]
    wps = [float(v) for r in rs if (v := r.scores.get("n_waypoints")) is not None]
    errors = Counter(r.error_category for r in rs if r.error_category)
    return {
        "runs": n,
        "successes": succ,
        "success_rate": _pct(succ, n),
        "accuracy": mean(accs) if accs else None,
        "accuracy_measured": mean(_acc(r) for r in measured) if measured else None,
        "perfect": sum(a >= PERFECT for a in accs),
        "high": sum(a >= HIGH for a in accs),
        "perfect_of_successes": _pct(sum(_succ(r) and _acc(r) >= PERFECT for r in rs), succ),
        "std": pstdev(accs) if len(accs) >= 2 else None,
        "avg_waypoints": mean(wps) if wps else None,
        "avg_distance_mi": mean(_measured(rs)) if measured else None,
        "errors": errors,
    }


def tags_of_pack(pack: PromptPack) -> dict[str, str]:
    """The prompt-pack facts the tables print, carried in every episode's tags so a report needs no prompt file."""
    bins = ",".join(f"{k}:{lo!r}..{hi!r}" for k, (lo, hi) in pack.length_bins.items())
    return {"prompt_pack": pack.name, "prompt_pack_size": str(len(pack.prompts)), "length_bins": bins}


def pack_of_results(results: list[EpisodeResult]) -> tuple[dict[str, tuple[float, float]] | None, int | None, str]:
    """Length bins, prompts in the pack and its name, as ``tags_of_pack`` stored them. Results recorded before
    those tags give (None, None, ""): the tables then print what they printed when the prompt file had moved."""
    for r in results:
        if "prompt_pack" in r.tags:
            bins = {}
            for part in filter(None, r.tags.get("length_bins", "").split(",")):
                key, _, span = part.partition(":")
                lo, _, hi = span.partition("..")
                bins[key] = (float(lo), float(hi))
            return bins, int(r.tags["prompt_pack_size"]), r.tags["prompt_pack"]
    return None, None, ""


def shipped_pack_facts(
    results: list[EpisodeResult], name: str
) -> tuple[dict[str, tuple[float, float]] | None, int | None, str]:
    """The facts of prompt pack ``name`` as shipped with rig, for results stored before ``tags_of_pack`` existed;
    (None, None, "") unless the pack ships here and holds every episode of the results."""
    from rig.benchmarks.base import DataError, embedded_data
    from rig.benchmarks.routeeval.data import load_prompt_pack

    try:
        pack = load_prompt_pack(embedded_data("routeeval", f"{name}.yaml", "RouteEval prompt packs") / f"{name}.yaml")
    except (DataError, OSError, ValueError):
        return None, None, ""
    if not {r.episode_id for r in results} <= {p.id for p in pack.prompts}:
        return None, None, ""
    return {k: v for k, v in pack.length_bins.items()}, len(pack.prompts), pack.name


MEASURES = {
    "sequence": "route measure: the waypoints in sequence (the paper's)",
    "closed": "route measure: closed (loops returned to the start, open out-and-back routes doubled; not the paper's)",
}


def measure_note(results: list[EpisodeResult]) -> str:
    """Which route measure the runs used; results stored before the option existed were measured closed."""
    used = sorted({r.tags.get("route_measure", "closed (stored before the option existed)") for r in results})
    return "; ".join(MEASURES.get(u, f"route measure: {u}") for u in used) + "." if used else ""


def routeeval_tables(
    results: list[EpisodeResult],
    label: str = "",
    bins: dict[str, tuple[float, float]] | None = None,
    prompts_in_pack: int | None = None,
    pack_name: str = "",
) -> list[Table]:
    """The paper's Tables 1-6 for one run's results, then the route categories (``bins``) and the per-prompt table.
    A long table on purpose: a list of table definitions (titles, columns, rows, notes) in the paper's order."""
    model = label or "model"
    s = summary(results)
    n = s["runs"]
    repeats = max((r.repeat for r in results), default=-1) + 1
    prompts = len({r.episode_id for r in results})
    pairs = sorted(
        {(r.tags.get("tool_mode", ""), r.tags.get("tool_mode_used", r.tags.get("tool_mode", ""))) for r in results}
    )
    modes = [
        used if asked == used else f"{used} (asked {asked}: the template shows no tools)"
        for asked, used in pairs
        if used
    ]
    scope = (
        f"{prompts} prompt(s){f' of {prompts_in_pack}' if prompts_in_pack else ''}"
        f"{f' in pack {pack_name!r}' if pack_name else ''} x {repeats} repeat(s) = {n} run(s); tool mode "
        f"{', '.join(modes) or 'n/a'}. The paper runs each prompt 16 times (--repeats 16)."
    )
    scope += " " + measure_note(results)
    one_model = " The paper compares 13 models; this run has one row (join runs with `rig compare`)."
    t1 = Table(
        title="RouteEval overall (layout of the paper's Table 1)",
        columns=["Model", "Success", "Accuracy", "Perfect", "Accuracy (measured routes)"],
        rows=[[model, pc(s["success_rate"]), s["accuracy"], pc(s["perfect_of_successes"]), s["accuracy_measured"]]],
        note=scope + one_model + " Accuracy averages all runs, a run without a measured route counting 0; "
        "'Accuracy (measured routes)' averages runs whose route was measured (the paper does not say "
        "which it used). Perfect = share of successful runs with accuracy >= 0.95 (the paper's "
        "Table 1 percentages are of successful runs: 98/729 = 13.4%). Success excludes every error of "
        "Table 5, a distance mismatch over 50% included.",
    )
    t2 = Table(
        title="RouteEval accuracy distribution (layout of Table 2)",
        columns=["Model", "Perfect", "High", "Std Dev"],
        rows=[[model, s["perfect"], s["high"], s["std"]]],
        note="Counts of runs with accuracy >= 0.95 (perfect) and >= 0.80 (high); population standard "
        "deviation of the per-run accuracy (failures 0)." + one_model,
    )
    t3 = Table(
        title="RouteEval success rate ranking (layout of Table 3)",
        columns=["Rank", "Model", "Success", "Runs"],
        rows=[[1, model, pc(s["success_rate"]), f"{s['successes']}/{n}"]],
        note="Rank among the models of this report (one)." + one_model,
    )
    t4 = Table(
        title="RouteEval waypoint analysis (layout of Table 4)",
        columns=["Model", "WP", "Dist", "Succ."],
        rows=[[model, s["avg_waypoints"], s["avg_distance_mi"], pc(s["success_rate"])]],
        note="WP: mean waypoints per usable call; Dist: mean measured route length in miles (over "
        "measured routes, mismatches included). n/a when no call was usable or no route measured.",
    )
    t5 = Table(
        title="RouteEval error analysis (layout of Table 5)",
        columns=["Error Type", "Frequency", "Percentage"],
        rows=[[lab, s["errors"].get(k, 0), pc(_pct(s["errors"].get(k, 0), n))] for k, lab in ERRORS.items()],
        note=f"Percentages of all {n} runs. Engine errors and replies cut at max_tokens are 'API timeout'.",
    )
    t6 = Table(
        title="RouteEval per-model errors (layout of Table 6)",
        columns=["Model", "Invalid WP", "Dist > 50%", "Tool Fail", "Timeout", "Invalid RT", "Other"],
        rows=[
            [model]
            + [
                s["errors"].get(k, 0)
                for k in (
                    "invalid_waypoint",
                    "distance_mismatch",
                    "tool_calling_failure",
                    "timeout",
                    "invalid_route_type",
                    "other",
                )
            ]
        ],
        note="The paper's Table 6 has no invalid-route-type column (Table 5 counts that error); it is added "
        "here so the row sums to the failed runs." + one_model,
    )
    tables = [t1, t2, t3, t4, t5, t6, category_table(results, bins), prompt_table(results)]
    return tables


def _bin_label(name: str, bins: dict[str, tuple[float, float]] | None) -> str:
    if not bins or name not in bins:
        return f"{name.capitalize()} routes"
    lo, hi = bins[name]
    return f"{name.capitalize()} routes ({lo:g}-{hi:g} miles)"


def category_table(results: list[EpisodeResult], bins: dict[str, tuple[float, float]] | None = None) -> Table:
    groups = [
        ("Simple (distance + location)", "category", "simple"),
        ("Moderate (terrain/route type)", "category", "moderate"),
        ("Complex (multiple constraints)", "category", "complex"),
        ("International locations", "region", "international"),
        ("US locations", "region", "US"),
        ("Generic locations", "region", "generic"),
        (_bin_label("short", bins), "length", "short"),
        (_bin_label("long", bins), "length", "long"),
    ]
    rows = []
    for lab, key, val in groups:
        rs = [r for r in results if r.tags.get(key) == val]
        s = summary(rs)
        rows.append([lab, s["accuracy"], pc(s["success_rate"]), s["runs"]])
    return Table(
        title="RouteEval by prompt characteristics (layout of Table 7)",
        columns=["Prompt Category", "Avg Accuracy", "Success Rate", "Runs"],
        rows=rows,
        note="n/a where the prompt pack has no prompt of that kind. 'Generic locations' and the Runs "
        "column are additions to the paper's layout; routes between the two length bins are in "
        "neither row.",
    )


def prompt_table(results: list[EpisodeResult]) -> Table:
    by: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by[r.episode_id].append(r)
    rows = []
    for pid, rs in by.items():
        s = summary(rs)
        top = s["errors"].most_common(1)
        t = rs[0]
        rows.append(
            [
                pid,
                t.tags.get("category"),
                t.tags.get("route_type"),
                rs[0].scores.get("d_target_mi"),
                s["runs"],
                pc(s["success_rate"]),
                s["accuracy"],
                s["avg_distance_mi"],
                f"{top[0][0]} ({top[0][1]})" if top else "-",
            ]
        )
    return Table(
        title="RouteEval per prompt",
        columns=[
            "Prompt",
            "Category",
            "Route type",
            "Target (mi)",
            "Runs",
            "Success",
            "Accuracy",
            "Mean distance (mi)",
            "Most common error",
        ],
        rows=rows,
    )
