"""The divergence section of compare.html (figures and tables) from a comparison folder's divergence.json, on runs
made with a fake engine and a report written by hand (the pass itself is tested in test_divergence.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.analyses.divergence.output import write_report
from rig.analyses.divergence.records import (
    ClassRow,
    DivergenceReport,
    DivergenceSettings,
    EpisodeRow,
    VariantSource,
    WorstToken,
)
from tests.render.test_report import make_run


def fake_report() -> DivergenceReport:
    """Two variants; q4_0 flips episode e1 (score 1 -> 0) with its divergence in tool-name tokens."""
    classes, episodes = [], []
    for v, base in (("gemma3-270m-q8_0", 0.002), ("gemma3-270m-q4_0", 0.25)):
        for cls, n, k in (("all", 40, 1.0), ("structure", 12, 0.5), ("tool_name", 4, 3.0), ("number", 0, 0)):
            m = base * k if n else None
            classes.append(
                ClassRow(
                    variant=v,
                    reference="gemma3-270m",
                    kind="quantization",
                    token_class=cls,
                    tokens=n,
                    mean_kld=m,
                    kld_ci_low=None if m is None else m * 0.8,
                    kld_ci_high=None if m is None else m * 1.3,
                    top1_agreement=None if m is None else 1 - m,
                    p99_kld=None if m is None else m * 5,
                )
            )
        for eid, delta in (("e1", -1.0 if "q4" in v else 0.0), ("e2", 0.0)):
            for cls in ("all", "tool_name"):
                episodes.append(
                    EpisodeRow(
                        variant=v,
                        episode_id=eid,
                        repeat=0,
                        token_class=cls,
                        tokens=20 if cls == "all" else 2,
                        mean_kld=base * (3 if eid == "e1" else 1),
                        top1_agreement=0.9,
                        score_reference=1.0,
                        score_variant=1.0 + delta,
                        score_delta=delta,
                    )
                )
    worst = WorstToken(
        variant="gemma3-270m-q4_0",
        episode_id="e1",
        repeat=0,
        token_class="tool_name",
        token="get",
        context='{"API": ["[[get]]<b>Weather"',
        kld=4.2,
        logprob_reference=-0.1,
        logprob_variant=-3.0,
    )
    return DivergenceReport(
        settings=DivergenceSettings(
            reference_run="ref",
            variants=[VariantSource(model="gemma3-270m-q8_0"), VariantSource(model="gemma3-270m-q4_0")],
            out="cmp",
        ),
        reference="gemma3-270m",
        engine="llamacpp",
        tokenizer="0123456789abcdef",
        episodes=2,
        pairs=2,
        classes=classes,
        episode_rows=episodes,
        worst=[worst],
    )


def test_compare_html_has_the_divergence_figures_and_tables(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from rig.analyses.compare import write_compare
    from rig.analyses.divergence.view import divergence_section

    runs = [make_run(tmp_path / "a", n_eps=4), make_run(tmp_path / "b", n_eps=4)]
    plain = tmp_path / "plain"
    plain.mkdir()
    write_compare(plain, runs, extra_html=divergence_section(plain))
    assert 'id="divergence"' not in (plain / "compare.html").read_text()  # no divergence.json, no section

    cdir = tmp_path / "cmp"
    write_report(fake_report(), cdir)
    write_compare(cdir, runs, extra_html=divergence_section(cdir))
    page = (cdir / "compare.html").read_text()
    section = page[page.index('<section class="dash" id="divergence">') :]
    section = section[: section.index("</section>")]
    assert "Token-level divergence against gemma3-270m" in section
    # the figures inline: bars per variant and class (CI whiskers), one scatter series per variant
    assert section.count("<svg") == 2
    assert "series:gemma3-270m-q8_0" in section and "series:gemma3-270m-q4_0" in section
    assert "gemma3-270m-q4_0 · tool_name" in section
    for stem in ("divergence_kld_by_class", "divergence_kld_vs_score"):
        assert (cdir / f"{stem}.svg").read_text().startswith("<?xml")
        assert (cdir / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"
    # the tables of compare.md's section: classes (a class without tokens left out), flips, worst tokens
    assert "<td>gemma3-270m-q4_0</td><td>quantization</td><td>tool_name</td><td>4</td><td>0.75</td>" in section
    assert "<td>number</td>" not in section
    assert "<td>gemma3-270m-q4_0</td><td>e1#0</td><td>-1</td><td>tool_name</td>" in section
    assert "&lt;b&gt;Weather" in section and "<b>Weather" not in section  # model text escaped


def test_scatter_without_score_deltas_says_why() -> None:
    pytest.importorskip("matplotlib")
    from rig.analyses.divergence.view import divergence_figures
    from rig.render.plots import figure_svg

    report = fake_report()
    for e in report.episode_rows:
        e.score_variant = e.score_delta = None
    svg = figure_svg(divergence_figures(report)["divergence_kld_vs_score"])
    assert "not-measured" in svg and "series:" not in svg
