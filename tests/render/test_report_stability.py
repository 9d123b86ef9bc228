"""Reports are stable across rig versions: a run folder written before the one-shape refactor (issue 17) re-reports
to the same markdown, byte for byte, from the folder alone.

The fixture is a real `rig bench --limit 2 --decode json --max-tokens 96 -O mobilitybench.similarity=jaccard` run of
the embedded Gemma 270M on all five benchmarks, made by rig at commit 5e84866; `report.md` is what that rig's
`report_markdown` printed for it while its data was present. The manifest's data paths were then pointed at a folder
that does not exist, so the test also proves the report needs no benchmark data.

Deliberate report changes since then are applied to `report.md` by hand and listed here, nothing else: issue 19
(fidelity) names RouteEval's route measure in Table 1's note, adds the paper's macro Overall beside the micro one in
UrbanGeoEval's Table 4, and names the judge ("self-judged") in UrbanGeoEval's R/Total table titles; says in
MobilityBench's reference table which similarity the reference uses; and names the scoring mode (paper or reference)
in CallNavi's Table 4 title and note, and says in that note that results stored before CallNavi scored both modes
show only their own. Issue 48 adds after each benchmark's summary its reliability table (pass^k and pass@k: "not
measured" here, the results carry no repeat seed) and its failure taxonomy (each failed episode's class, with the
benchmark's own reasons beside it).
"""

import shutil
from pathlib import Path

from rig.render.report import report_markdown

FIXTURE = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"


def test_old_run_folder_reports_the_same_tables(tmp_path: Path) -> None:
    run = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, run)
    (run / "report.md").unlink()
    assert not (tmp_path / "data-moved-away").exists()
    assert report_markdown(run) == (FIXTURE / "report.md").read_text(encoding="utf-8")
