"""`rig compare`'s reliability section: pass^k paired against the reference, the taxonomy per variant, and the
transitions between the reference's outcome and each variant's."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.analyses.compare import compare_report
from rig.runfolder.folder import RunFolder
from rig.scoring.reliability import pass_hat_k
from tests.render.test_export import make_repeat_run


def _states(run: Path) -> dict[tuple[str, int], str]:
    s = RunFolder(run).summary("callnavi")
    assert s.failures is not None
    failed = s.failures.states()
    return {(r.episode_id, r.repeat): failed.get((r.episode_id, r.repeat), "correct") for r in RunFolder(run).results()}


def test_compare_pairs_pass_k_and_tabulates_transitions(tmp_path: Path) -> None:
    ref = make_repeat_run(tmp_path, repeats=3, temperature=0.7, salt="a")
    var = make_repeat_run(tmp_path, repeats=3, temperature=0.7, salt="b")
    md, _figs = compare_report([ref, var])
    assert "### pass^k against" in md and "### Failure taxonomy per variant" in md
    # the paired difference of pass^3 over the episodes both runs have, as the section prints it
    counts = [RunFolder(d).summary("callnavi").reliability.counts for d in (ref, var)]  # type: ignore[union-attr]
    diffs = [pass_hat_k(*counts[1][e], 3) - pass_hat_k(*counts[0][e], 3) for e in counts[0]]
    assert f"| k = 3 | {len(diffs)} |" in md and f"{sum(diffs) / len(diffs):+.3f} [" in md
    # every (episode, repeat) whose outcome changed, counted once, from the reference's state to the variant's
    a, b = _states(ref), _states(var)
    moves: dict[tuple[str, str], int] = {}
    for key in a:
        if a[key] != b[key]:
            moves[(a[key], b[key])] = moves.get((a[key], b[key]), 0) + 1
    assert moves and any("correct" in m for m in moves)
    section = md.split("### Transitions from", 1)[1]
    for (x, y), n in moves.items():
        assert f"| {x} | {y} | {n} |" in section
    assert f"{sum(moves.values())} of {len(a)} paired (episode, repeat) results changed outcome" in section


def test_compare_of_runs_without_seeds_says_not_measured(tmp_path: Path) -> None:
    import shutil

    fixture = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"
    run = tmp_path / "old"
    shutil.copytree(fixture, run)
    pytest.importorskip("matplotlib")
    md, _ = compare_report([run, run])
    table = md.split("### pass^k against", 1)[1].split("###", 1)[0]
    assert "not measured" in table and "0.000" not in table
