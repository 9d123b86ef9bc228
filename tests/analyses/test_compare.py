"""compare_report over runs made with a fake engine (the end-to-end compare test is in test_compare.py)."""

from pathlib import Path

from rig.analyses.compare import compare_report
from rig.runfolder.spec import RunSpec
from tests.render.test_report import cutting_engine, make_run


def test_variants_table_has_the_share_of_cut_replies(tmp_path: Path) -> None:
    full = make_run(tmp_path / "a", n_eps=8, engine=cutting_engine(0))
    cut = make_run(tmp_path / "b", n_eps=8, engine=cutting_engine(2))
    silent = make_run(tmp_path / "c", n_eps=8)  # no finish reasons at all
    md, _ = compare_report([full, cut, silent])
    lines = md.splitlines()
    col = next(x for x in lines if x.startswith("| Model | Quant")).split(" | ").index("Cut at max_tokens")
    rows = [x for x in lines if x.startswith("| gemma3-270m |")][:3]  # the Variants table comes first
    assert [r.split(" | ")[col] for r in rows] == ["0.000", "0.500", "not measured"]


def test_variants_are_a_model_under_a_decode_and_tool_mode() -> None:
    import pytest

    from rig.analyses.compare import expand_variants, parse_variant
    from rig.execution.bench import BenchError

    assert parse_variant("gemma3-270m@decode=json,tool-mode=native").label == "gemma3-270m@decode=json,tool_mode=native"
    vs = expand_variants(["gemma3-270m"], ["none", "json"])
    assert [v.label for v in vs] == ["gemma3-270m@decode=none", "gemma3-270m@decode=json"]
    # a spec's own setting wins over the list, so listing it under both would run it twice: refused
    with pytest.raises(BenchError, match="listed twice"):
        expand_variants(["gemma3-270m@decode=json"], ["none", "json"])
    for bad in ("gemma3-270m@decode=xml", "gemma3-270m@temperature=1", "@decode=json"):
        with pytest.raises(BenchError, match="variant"):
            parse_variant(bad)


def test_a_decode_variant_gets_bench_s_tool_mode_for_it(tmp_path: Path) -> None:
    from rig.analyses.compare import Variant, cell_spec
    from rig.execution.bench import BenchOptions
    from rig.execution.launch import bench_argv
    from rig.runfolder.spec import read_spec

    o = BenchOptions(benchmark="routeeval", decode="none", tool_mode="prompt", seed=0)

    def handed(v: Variant) -> RunSpec:  # what the variant's process reads: the spec.json its argv names
        argv = bench_argv(cell_spec(v, o), tmp_path / v.label, tmp_path)
        return read_spec(Path(argv[argv.index("--spec") + 1]))

    json_spec = handed(Variant(model="m", decode="json"))
    assert json_spec.decode == "json" and json_spec.tool_mode == "json"
    plain = handed(Variant(model="m"))
    assert plain.decode == "none" and plain.tool_mode == "prompt"
    fixed = handed(Variant(model="m", decode="json", tool_mode="native"))
    assert fixed.tool_mode == "native"


def test_same_model_under_two_decode_modes_is_named_by_mode(tmp_path: Path) -> None:
    from rig.analyses.compare import write_compare
    from rig.runfolder.manifest import RunManifest

    none = make_run(tmp_path / "a", n_eps=6, engine=cutting_engine(0))
    json_run = make_run(tmp_path / "b", n_eps=6, engine=cutting_engine(3))
    for run, mb in ((none, 900), (json_run, 950)):  # the fake runs measured no memory
        man = RunManifest.read(run)
        man.peak_rss_bytes = mb * 2**20
        if run == json_run:
            man.config.decode, man.config.tool_mode = "json", "json"
        man.write(run)
    md = write_compare(tmp_path, [none, json_run])
    assert "| gemma3-270m@decode=none,tool_mode=prompt | q4_k_m | 6 |" in md
    assert "| gemma3-270m@decode=json,tool_mode=json | q4_k_m | 6 |" in md
    assert "Paired differences against gemma3-270m@decode=none,tool_mode=prompt" in md
    for stem in ("pareto_latency", "pareto_memory"):
        svg = (tmp_path / f"{stem}.svg").read_text()
        assert svg.count('id="point:gemma3-270m@decode=') == 2  # one point per variant, named
        assert (tmp_path / f"{stem}.pdf").read_bytes()[:4] == b"%PDF"
        assert (tmp_path / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"
