"""RouteEval's gold and anti-gold agents through `rig selftest`'s library API: in every tool mode and route measure
gold's route succeeds, matches the route type and is perfect (accuracy >= 0.95: accuracy itself is a documented cap,
1 only when a route's length equals the target), anti-gold scores 0 on all three."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rig.agents.scripted import ScriptedEngine
from rig.benchmarks.base import RunContext
from rig.benchmarks.routeeval.benchmark import RouteEval
from rig.benchmarks.routeeval.scoring import PERFECT
from rig.decoding.accept import acceptors
from rig.execution.selftest import SelftestOptions, run_selftest
from rig.records import Sampling


def test_gold_reaches_every_bound_in_every_mode(helsinki_pack: Path) -> None:
    found, _ = acceptors(None)  # llguidance and xgrammar check every constrained reply
    report = run_selftest(SelftestOptions(benchmarks=["routeeval"], limit=2), found)
    (bench,) = report.benchmarks
    modes = {(m.mode.tool_mode, m.mode.options["route_measure"]) for m in bench.modes}
    assert modes == {(t, r) for t in ("native", "prompt", "json", "yaml") for r in ("sequence", "closed")}
    for mode in bench.modes:
        assert mode.error is None and mode.episodes == 2 and not mode.unavailable, mode.mode.label
        lines = {m.metric: m for m in mode.metrics}
        for k in ("success", "perfect", "route_type_match"):
            assert (lines[k].gold, lines[k].anti, lines[k].verdict) == (1.0, 0.0, "ok"), (mode.mode.label, k)
        acc = lines["accuracy"]
        assert acc.verdict == "cap" and acc.anti == 0.0 and acc.gold is not None and acc.gold >= PERFECT
        assert {(s.agent, s.metric, s.cause) for s in mode.shortfalls} <= {("gold", "accuracy", "definition")}
    assert report.ok


def test_gold_route_is_perfect_on_every_prompt(helsinki_pack: Path) -> None:
    """Every prompt of the embedded pack: a perfect route that starts where the reference starts (and a loop or an
    out-and-back ends there too), through at most 12 waypoints."""
    bench = RouteEval(None, {})
    engine = ScriptedEngine()
    ctx = RunContext(sampling=Sampling(), tool_mode="json")
    by_id = {p.id: p for p in bench.prompts().prompts}
    for ep in bench.episodes():
        p = by_id[ep.id]
        engine.play(bench.gold(ep, ctx))
        res = asyncio.run(bench.run_episode(ep, engine, ctx, 0))
        assert res.error_category is None and res.scores["success"] == 1.0, (ep.id, res.error)
        assert res.scores["accuracy"] >= PERFECT and res.scores["perfect"] == 1.0, ep.id
        assert res.scores["route_type_match"] == 1.0
        places = [w["address"] for w in res.tool_calls[0].arguments["waypoints"]]
        assert places[0] == p.reference[0] and len(places) <= 12
        if p.route_type != "point-to-point":
            assert places[-1] == p.reference[0]


def test_prompt_without_a_playable_reference_is_gold_unavailable(helsinki_pack: Path, tmp_path: Path) -> None:
    """A lab's prompt pack (--data): a prompt with no reference places, or one the map does not have, gets a
    "gold unavailable" line naming the file and the field; the other prompts still run, to their bounds."""
    import yaml

    base = {"city": "Helsinki", "region": "international", "category": "simple", "style": "simple"}
    prompts = [
        {**base, "id": "ok", "text": "Easy loop from Ateneum.", "target_miles": 1.5, "route_type": "loop",
         "reference": ["Ateneum", "Kaisaniemen puisto", "Suomen Kansallisteatteri"]},
        {**base, "id": "none", "text": "A loop from Ateneum.", "target_miles": 1.5, "route_type": "loop"},
        {**base, "id": "away", "text": "A loop from Ateneum.", "target_miles": 1.5, "route_type": "loop",
         "reference": ["Ateneum", "Central Park"]},
    ]  # fmt: skip
    pack = tmp_path / "mine.yaml"
    pack.write_text(yaml.safe_dump({"name": "mine", "prompts": prompts}), encoding="utf-8")
    opts = SelftestOptions(benchmarks=["routeeval"], data=pack, modes=["tool_mode=json route_measure=sequence"])
    report = run_selftest(opts, [])
    (mode,) = report.benchmarks[0].modes
    assert mode.error is None and mode.episodes == 3
    assert mode.unavailable == [
        f"none: {pack}: prompts.1 (id none).reference: no reference places on a map that covers the prompt",
        f"away: {pack}: prompts.2 (id away).reference: 'Central Park' is not on the map",
    ]
    lines = {m.metric: m for m in mode.metrics}
    assert (lines["success"].gold, lines["success"].anti, lines["accuracy"].verdict) == (1.0, 0.0, "cap")
    assert report.ok


def test_a_route_measured_a_little_wrong_fails_the_selftest(helsinki_pack: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Accuracy is capped, so a reader losing the loop's last waypoint (the way home: 5-20% of the route, still a
    success) would hide under the cap; `perfect` is held to 1 and reports it."""
    import rig.benchmarks.routeeval.benchmark as B

    real = B.check_call

    def drops_the_last(args, max_waypoints, address_max):  # type: ignore[no-untyped-def]
        category, why, clean = real(args, max_waypoints, address_max)
        return category, why, {**clean, "addresses": clean["addresses"][:-1]} if clean else clean

    monkeypatch.setattr(B, "check_call", drops_the_last)
    opts = SelftestOptions(benchmarks=["routeeval"], limit=1, modes=["tool_mode=json route_measure=sequence"])
    (mode,) = run_selftest(opts, []).benchmarks[0].modes
    lines = {m.metric: m for m in mode.metrics}
    assert lines["success"].verdict == "ok" and lines["accuracy"].verdict == "cap"
    assert lines["perfect"].verdict == "short" and lines["perfect"].gold == 0.0
