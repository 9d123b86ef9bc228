"""HTML report: self-contained, renders in headless Chromium with no console error and no network request."""

import importlib.util
import json
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest

from rig.render.html import html_report
from tests.devtools import HEADLESS
from tests.render.test_report import make_run


def _histograms(html: str) -> dict[str, list[int]]:
    """Each matplotlib histogram on the page: its title (the axes' gid) and the count of each bar (bar gids)."""
    hists = {}
    for svg in re.findall(r"<svg.*?</svg>", html, re.S):
        title = re.search(r'id="f[0-9a-f]+-histogram:([^"]*)"', svg)
        if title:
            bars = sorted((int(i), int(n)) for i, n in re.findall(r'id="f[0-9a-f]+-bin(\d+):(\d+)"', svg))
            assert [i for i, _ in bars] == list(range(len(bars)))
            hists[unescape(title.group(1))] = [n for _, n in bars]
    return hists


def test_html_is_self_contained(tmp_path: Path) -> None:
    html = html_report([make_run(tmp_path)])
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', html)  # nothing fetched from anywhere
    assert "<script src" not in html and "<link" not in html
    data = json.loads(re.search(r'<script type="application/json" id="episodes">(.*?)</script>', html, re.S).group(1))
    assert len(data["episodes"]) == 32 and len(data["prompts"]) == 32
    assert "Question start" in next(iter(data["prompts"].values()))  # prompts rebuilt from the benchmark data
    assert "CallNavi (layout of the paper&#x27;s Table 4)" in html or "CallNavi (layout of the paper's Table 4)" in html
    assert "not measured" in html  # CPU run: GPU memory plot and rows say so
    assert "Tool-call forms" in html and '"cf": "bare"' in html  # the table, and each turn's form in the trace


def test_dashboard_histograms_are_matplotlib_figures_of_the_stored_numbers(tmp_path: Path) -> None:
    """Latency and completion tokens from known replies: the page's histograms are matplotlib figures (their gids)
    with the counts per bin those numbers give; replies without a first-token time say so instead of a plot."""
    pytest.importorskip("matplotlib")
    from rig.records import Timings
    from tests.execution.test_runner import oracle
    from tests.fakes import FakeEngine
    from tests.render.test_report import _build_fake

    latencies, tokens = [1.0, 1.25, 3.0], [5, 7, 9]
    given: list[tuple[float, int]] = []

    class Known(FakeEngine):
        async def chat(self, request):  # type: ignore[no-untyped-def]
            gen = await super().chat(request)
            k = len(given)
            given.append((latencies[k % 3], tokens[k % 3]))
            return gen.model_copy(
                update={"completion_tokens": given[-1][1], "timings": Timings(e2e_s=given[-1][0], ttft_s=None)}
            )

    run_dir = make_run(tmp_path, n_eps=8, engine=Known(oracle(_build_fake(None)[2])))
    html = html_report([run_dir], figures_dir=tmp_path / "figures")
    hists = _histograms(html)
    assert set(hists) == {"callnavi: end-to-end latency", "callnavi: completion tokens"}
    a, b, c = (given.count(pair) for pair in zip(latencies, tokens, strict=True))  # replies given each pair
    assert a and b and c and a + b + c == len(given)
    # 20 bins over 1.0-3.0, 0.1 wide: 1.0 opens bin 0, 1.25 falls in bin 2, 3.0 closes bin 19
    assert hists["callnavi: end-to-end latency"] == [a, 0, b] + [0] * 16 + [c]
    # whole tokens 5-9: one bar per value, empty ones included
    assert hists["callnavi: completion tokens"] == [a, 0, b, 0, c]
    assert f"Time to first token: not measured (none of the {len(given)} replies recorded a first-token time)" in html
    # matplotlib writes each text as a comment beside its glyphs, "--" there as "- -"
    assert re.search(r"GPU memory over time: not measured \(no -\s?-gpu given \(CPU run\)\)", html)
    assert {p.name for p in (tmp_path / "figures").iterdir()} >= {
        f"{stem}.{ext}"
        for stem in ("latency_callnavi", "tokens_callnavi", "ttft_1", "gpu_memory_1")
        for ext in ("svg", "pdf", "png")
    }


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _can_isolate() -> bool:
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


# Chromium makes background requests of its own (time sync, component updates): it only ever runs here inside a
# network namespace with no route out, so nothing can leave the machine. The page itself is checked by its CSP
# (default-src 'none'): any request it attempted would be blocked and logged as a console error, which fails the test.
def _chromium(tmp_path: Path, page: Path, shot: Path | None = None, height: int = 1800) -> str:
    """The page's DOM after its scripts ran, in headless Chromium inside `unshare -n`; fails on any console error
    (CSP violations included). With ``shot``, also a screenshot, kept in the test's output folder."""
    base = ["unshare", "-n", CHROMIUM, *HEADLESS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [*base, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln]
    assert not [ln for ln in console if "Error" in ln or "Uncaught" in ln or "Content Security Policy" in ln], console
    if shot is not None:
        subprocess.run(
            [*base, f"--screenshot={shot}", f"--window-size=1400,{height}", page.as_uri()],
            capture_output=True,
            timeout=120,
        )
        assert shot.exists() and shot.stat().st_size > 20_000  # a real rendering, not a blank page
    return dom.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
@pytest.mark.skipif(not _can_isolate(), reason="unshare -n is not permitted here; Chromium is not run un-isolated")
def test_html_renders_in_headless_chromium(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    page = tmp_path / "report.html"
    page.write_text(html_report([run_dir]))
    dom = _chromium(tmp_path, page, tmp_path / "shot.png", height=2400)
    body = re.search(r'<tbody id="ep_body">(.*?)</tbody>', dom, re.S).group(1)
    assert body.count("<tr>") == 32  # the script rendered every episode row (one page)
    assert "32 episodes match" in dom
    # latency, tokens and time to first token drawn by matplotlib, one count per stored reply
    block = re.search(r'<script type="application/json" id="episodes">(.*?)</script>', page.read_text(), re.S)
    gens = sum(len(e["gens"]) for e in json.loads(block.group(1))["episodes"])
    if importlib.util.find_spec("matplotlib"):
        hists = _histograms(dom)
        assert set(hists) == {"callnavi: end-to-end latency", "callnavi: completion tokens", "Time to first token"}
        assert all(sum(counts) == gens for counts in hists.values()), hists
    else:
        assert "figures need matplotlib" in dom
    assert "Content-Security-Policy" in page.read_text() and "default-src 'none'" in page.read_text()


def test_markup_in_replies_cannot_break_the_episode_data(tmp_path: Path) -> None:
    """A reply holding ``<!--<script>`` (or ``</script>``) inside the JSON block must not end or comment out the
    block: every ``<`` in it is written as ``\\u003c``."""
    from tests.execution.test_runner import oracle
    from tests.fakes import FakeEngine
    from tests.render.test_report import _build_fake

    hostile = "<!--<script> </script><!-- -->"
    bench = _build_fake(None)[2]
    run_dir = make_run(tmp_path, engine=FakeEngine(lambda req: hostile + oracle(bench)(req), delay=0.002))
    html = html_report([run_dir])
    block = re.search(r'<script type="application/json" id="episodes">(.*?)</script>', html, re.S).group(1)
    assert "<" not in block
    data = json.loads(block)
    assert len(data["episodes"]) == 32
    assert all(g["text"].startswith(hostile) for e in data["episodes"] for g in e["gens"])


FIVE = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"  # a real five-benchmark run of the embedded model


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
@pytest.mark.skipif(not _can_isolate(), reason="unshare -n is not permitted here; Chromium is not run un-isolated")
def test_markup_in_replies_renders_every_row_in_chromium(tmp_path: Path) -> None:
    from tests.execution.test_runner import oracle
    from tests.fakes import FakeEngine
    from tests.render.test_report import _build_fake

    bench = _build_fake(None)[2]
    run_dir = make_run(tmp_path, engine=FakeEngine(lambda req: "<!--<script>" + oracle(bench)(req), delay=0.002))
    page = tmp_path / "report.html"
    page.write_text(html_report([run_dir]))
    dom = _chromium(tmp_path, page)
    body = re.search(r'<tbody id="ep_body">(.*?)</tbody>', dom, re.S).group(1)
    assert body.count("<tr>") == 32 and "32 episodes match" in dom
    assert "&lt;!--&lt;script&gt;" in body  # the reply is shown as text


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
@pytest.mark.skipif(not _can_isolate(), reason="unshare -n is not permitted here; Chromium is not run un-isolated")
def test_dashboard_of_a_five_benchmark_run_comes_first(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    shutil.copytree(FIVE, run)
    page = run / "report.html"
    page.write_text(html_report([run], figures_dir=run / "figures"))
    dom = _chromium(tmp_path, page, tmp_path / "dashboard_five.png")
    # what a reader meets first: the dashboard, then the run's tables, then the episodes
    assert dom.index("Dashboard") < dom.index("Latency, tokens, memory") < dom.index('id="ep_body"')
    dashboard = dom[dom.index("Dashboard") : dom.index("Latency, tokens, memory")]
    for name in ("callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo"):
        assert name in dashboard
    assert "Why episodes failed" in dashboard and "Headline score with 95% CI" in dashboard
    names = ("callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo")
    hists = _histograms(dashboard)  # per benchmark, in the run's order: latency, then completion tokens
    assert list(hists) == [f"{n}: {what}" for n in names for what in ("end-to-end latency", "completion tokens")]
    # the episode trace: model turns and tool calls with the map answer's provenance, not raw score JSON
    body = re.search(r'<tbody id="ep_body">(.*)</tbody>', dom, re.S).group(1)
    assert "Model, turn 1" in body and "tool call" in body and 'class="src src-' in body
    assert {p.name for p in (run / "figures").iterdir()} >= {
        "headline.svg",
        "headline.pdf",
        "headline.png",
        "failures.svg",
        *(f"{what}_{n}.{ext}" for what in ("latency", "tokens") for n in names for ext in ("svg", "pdf", "png")),
    }


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
@pytest.mark.skipif(not _can_isolate(), reason="unshare -n is not permitted here; Chromium is not run un-isolated")
def test_dashboard_of_a_comparison_shows_the_pareto_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from rig.runfolder.manifest import RunManifest
    from tests.render.test_report import cutting_engine

    none = make_run(tmp_path / "a", n_eps=8, engine=cutting_engine(0))
    json_run = make_run(tmp_path / "b", n_eps=8, engine=cutting_engine(3))
    for run, mb in ((none, 900), (json_run, 950)):
        man = RunManifest.read(run)
        man.peak_rss_bytes = mb * 2**20
        if run == json_run:
            man.config.decode, man.config.tool_mode = "json", "json"
        man.write(run)
    page = tmp_path / "compare.html"
    page.write_text(html_report([none, json_run], figures_dir=tmp_path / "figures"))
    dom = _chromium(tmp_path, page, tmp_path / "dashboard_compare.png")
    dashboard = dom[dom.index("Dashboard") : dom.index('id="ep_body"')]
    assert "Across runs" in dashboard and "Score against latency" in dashboard
    assert "point:gemma3-270m (none/prompt) #1" in dashboard and "point:gemma3-270m (json/json) #2" in dashboard
    assert (tmp_path / "figures" / "pareto_latency.pdf").read_bytes()[:4] == b"%PDF"


def test_html_shows_pass_k_and_the_failure_taxonomy(tmp_path: Path) -> None:
    """A run with repeats: the page has the pass^k table with the values of its summary, the taxonomy table, and the
    dashboard's failures figure counts the taxonomy's classes."""
    pytest.importorskip("matplotlib")
    from rig.runfolder.folder import RunFolder
    from tests.render.test_export import make_repeat_run

    run = make_repeat_run(tmp_path, repeats=3, temperature=0.7)
    s = RunFolder(run).summary("callnavi")
    assert s.reliability is not None and s.failures is not None and s.failures.failures
    html = html_report([run])
    assert "Reliability over repeats: pass^k and pass@k" in html and "Failure taxonomy" in html
    for p in s.reliability.rows:
        assert f"{p.pass_hat:.3f} [{p.pass_hat_low:.3f}, {p.pass_hat_high:.3f}]" in html
    dashboard = html[html.index("Dashboard") : html.index("Reliability over repeats")]
    for cls in s.failures.classes():
        assert cls in dashboard
