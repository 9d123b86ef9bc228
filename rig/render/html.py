"""Self-contained HTML report: no network (styles, scripts and SVG plots inline).

A dashboard comes first (per benchmark the headline score with its CI as a bar, latency and token distributions, why
episodes failed, and for several runs the Pareto plots), then the tables, then the episode browser, where a click
opens the episode's trace: prompt, each model turn, the tool calls it made with their answers (map answers marked
hit / fuzzy / miss from the tool result's meta) and the scores.
Episodes are embedded once as JSON and paged by a small inline script, so a 10,000-episode run opens quickly.
Long prompts are clipped in the browser view (head and tail kept, the cut is stated); the store keeps them whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rig.benchmarks import benchmark_tables, recorded_prompts
from rig.benchmarks.base import Table
from rig.names import escape
from rig.records import EpisodeResult, write_atomic
from rig.render.dashboard import BenchDash, Figures, bench_dash, dashboard, gpu_line, no_values
from rig.render.plots import (
    Point,
    histogram_plot,
    save_figure,
)
from rig.render.reliability import failure_table, pass_k_table
from rig.render.report import (
    NM,
    call_form_table,
    ci_table,
    efficiency_table,
    fmt,
    grammar_backend,
    report_markdown,
    telemetry_table,
)
from rig.runfolder.config import BenchmarkInfo
from rig.runfolder.folder import RunFolder
from rig.runfolder.summary import HeadlineScore
from rig.runformat import RunFileError, storage_error

CLIP_HEAD, CLIP_TAIL = 300, 900
# The page may fetch nothing at all: any attempt is blocked and shows as a console error.
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px}
th{background:#f3f3f3}.note{color:#555;font-size:12px;font-style:italic}pre{white-space:pre-wrap;background:#f8f8f8;
padding:6px;font-size:12px;max-height:360px;overflow:auto}.ok{color:#176b2c}.bad{color:#a31b1b}
#filters input,#filters select{margin-right:10px}.plots{display:flex;flex-wrap:wrap;gap:16px}
.plots svg{max-width:100%;height:auto}.dash{border:1px solid #ddd;padding:8px 14px;margin:12px 0;border-radius:6px}
.src{padding:0 4px;border-radius:3px;font-size:11px;color:#fff}.src-hit,.src-pack{background:#176b2c}
.src-fuzzy{background:#b8860b}.src-miss{background:#a31b1b}.turn{border-left:3px solid #2a6fdb;padding-left:8px;
margin:6px 0}.call{border-left:3px solid #888;padding-left:8px;margin:4px 0 4px 16px}"""

# A backslash ending a line continues it: the script the page gets has the same lines as without it.
JS = """const DATA=JSON.parse(document.getElementById('episodes').textContent);const EP=DATA.episodes;let page=0;\
const PER=100;
function sel(id){return document.getElementById(id).value}
function matches(e){const b=sel('f_bench'),c=sel('f_cat'),o=sel('f_out'),q=sel('f_text').toLowerCase();
 if(b&&e.benchmark!==b)return false; if(c&&!Object.values(e.tags).includes(c))return false;
 if(o==='correct'&&!(e.headline>=0.5))return false; if(o==='wrong'&&!(e.headline<0.5))return false;
 if(o==='failed'&&e.status!=='failed')return false;\
 if(q&&!(e.id.toLowerCase().includes(q)||(e.error||'').toLowerCase().includes(q)))return false;return true}
function esc(s){return String(s??'').replace(/[&<>]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]))}
function call(c){const src=(c.meta||{}).source;const badge=src?` <span class="src src-${esc(src)}">${esc(src)}\
</span>`:'';const sim=(c.meta||{}).similarity;const out=c.error?`<span class="bad">${esc(c.error_category||'error')}\
: ${esc(c.error)}</span>`:`<pre>${esc(JSON.stringify(c.answer,null,1)).slice(0,2000)}</pre>`;
 return `<div class="call"><b>tool call</b> <code>${esc(c.name)}(${esc(JSON.stringify(c.arguments))})</code>\
${badge}${sim!=null?' similarity '+(+sim).toFixed(2):''} ${c.verdict==='invalid'?'<span class="bad">invalid</span>':''}\
${out}</div>`}
function trace(e){const used=new Set();let h=`<b>Prompt</b><pre>${esc(DATA.prompts[e.prompt])}</pre>`;
 e.gens.forEach((g,i)=>{h+=`<div class="turn"><b>Model, turn ${i+1}</b> (${g.pt??'–'} prompt / ${g.ct??'–'} \
completion tokens, ${g.e2e??'–'} s${g.fr?', stopped: '+esc(g.fr):''}\
${g.cf?', call read: '+esc(g.cf):''})<pre>${esc(g.text)}</pre></div>`;
  e.calls.forEach((c,j)=>{if(c.step===i&&!used.has(j)){used.add(j);h+=call(c)}})});
 e.calls.forEach((c,j)=>{if(!used.has(j))h+=call(c)});
 h+=`<b>Scores</b><ul>${Object.entries(e.scores).map(([k,v])=>`<li>${esc(k)}: ${esc(v??'–')}</li>`).join('')}\
</ul>`;if(e.error)h+=`<b>Error</b><pre>${esc(e.error)}</pre>`;return h}
function render(){const rows=EP.filter(matches);const n=rows.length;const start=page*PER;
 document.getElementById('count').textContent=n+' episodes match';
 const body=rows.slice(start,start+PER).map(e=>`<tr><td>${esc(e.benchmark)}</td><td><details><summary>\
${esc(e.id)} #${e.repeat}</summary>${trace(e)}</details></td>
 <td>${esc(Object.entries(e.tags).map(([k,v])=>k+'='+v).join(', '))}</td><td class="${e.headline>=0.5?'ok':'bad'}">\
${e.headline??'–'}</td>
 <td>${esc(Object.entries(e.scores).map(([k,v])=>k+'='+(v===null?'–':+(+v).toFixed(3))).join(', '))}</td>\
<td>${esc(e.status)}</td><td>${esc(e.error_category||'')}</td></tr>
`).join('');
 document.getElementById('ep_body').innerHTML=body;
 document.getElementById('page').textContent=`page ${page+1} of ${Math.max(1,Math.ceil(n/PER))}`}
function go(d){page=Math.max(0,page+d);render()}
for(const id of ['f_bench','f_cat','f_out','f_text'])document.getElementById(id).addEventListener('input',()=>{page=0;\
render()});
render();"""


def table_html(t: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(fmt(c))}</td>" for c in row) + "</tr>" for row in t.rows)
    note = f'<p class="note">{escape(t.note)}</p>' if t.note else ""
    return f"<h3>{escape(t.title)}</h3><table><tr>{head}</tr>{body}</table>{note}"


def _clip(text: str) -> str:
    if len(text) <= CLIP_HEAD + CLIP_TAIL + 100:
        return text
    omitted = len(text) - CLIP_HEAD - CLIP_TAIL
    note = f"… [{omitted} characters omitted here; full text in results.sqlite] …"
    return f"{text[:CLIP_HEAD]}\n{note}\n{text[-CLIP_TAIL:]}"


def html_report(run_dirs: list[Path], figures_dir: Path | None = None, extra: str = "") -> str:
    """The page; with `figures_dir`, each figure is also written there as SVG, PDF and PNG. ``extra``: a further
    section (HTML) after the dashboard (a comparison's divergence section)."""
    sections: list[str] = []
    page = _Page()
    pareto: list[Point] = []  # one point per run: its last benchmark with a headline CI, against latency
    pareto_mem: list[Point] = []
    pareto_energy: list[Point] = []
    for i, run_dir in enumerate(run_dirs):
        folder = RunFolder(run_dir)
        spec, cfg = folder.manifest.config.model, folder.manifest.config
        label = spec.name if len(run_dirs) == 1 else f"{spec.name} ({cfg.decode}/{cfg.tool_mode}) #{i + 1}"
        section, best = _run_section(folder, i, label, page)
        sections.append(section)
        if best is not None:
            run_summary = folder.summary()
            memory = run_summary.gpu_peak_bytes or run_summary.peak_rss_bytes
            pt = Point(label=label, x=run_summary.e2e_p50_s, y=best.mean, y_low=best.low, y_high=best.high)
            pareto.append(pt)
            pareto_mem.append(pt.model_copy(update={"x": None if memory is None else memory / 2**30}))
            pareto_energy.append(pt.model_copy(update={"x": run_summary.energy.per_episode_j}))
    dash = dashboard(page.dash, pareto, pareto_mem, pareto_energy, page.figs)
    if figures_dir is not None:
        for stem, fig in page.figs.figs.items():
            save_figure(fig, figures_dir, stem)
    # Every "<" as \u003c (JSON.parse reads it back): "</script>", "<!--" and "<script" cannot end the block or
    # switch the HTML parser into a script-data escape state that swallows the rest of the page.
    data = json.dumps({"prompts": page.prompts, "episodes": page.episodes}, ensure_ascii=False).replace("<", "\\u003c")
    return (
        f'<!doctype html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>rig report</title>'
        f"<style>{CSS}</style></head>"
        f"<body><h1>rig report</h1>{dash}{extra}{''.join(sections)}{_browser(page.episodes)}"
        f'<script type="application/json" id="episodes">{data}</script><script>{JS}</script></body></html>'
    )


@dataclass
class _Page:
    """What the runs' sections gather for the rest of the page: the dashboard's rows, the figures, the episode
    browser's records and their prompts (one copy per episode, shared by its repeats)."""

    dash: list[BenchDash] = field(default_factory=list)
    figs: Figures = field(default_factory=lambda: Figures())
    episodes: list[dict[str, Any]] = field(default_factory=list)
    prompts: dict[str, str] = field(default_factory=dict)


def _run_section(folder: RunFolder, i: int, label: str, page: _Page) -> tuple[str, HeadlineScore | None]:
    """One run's section (manifest, each benchmark's tables and CI, telemetry, the first-token and GPU-memory
    figures), its benchmarks added to ``page``; and the headline of its last benchmark with a CI, the run's point
    on the across-runs plots."""
    man = folder.manifest
    cfg, spec = man.config, man.config.model
    gpu = man.gpu_memory
    parts = [_manifest_html(folder)]
    all_results = []
    best: HeadlineScore | None = None
    for b in cfg.benchmarks:
        results = folder.results(b.name)
        all_results += results
        parts += [table_html(t) for t in benchmark_tables(b, results, label=spec.name)]
        summary = folder.summary(b.name)
        ci = ci_table(summary, spec.name)
        if ci:
            parts.append(table_html(ci))
            best = summary.headline
        parts += [table_html(t) for t in (pass_k_table(summary), failure_table(summary)) if t is not None]
        forms = call_form_table(summary)
        if forms:
            parts.append(table_html(forms))
        headline = summary.headline.by_episode() if summary.headline else {}
        page.dash.append(bench_dash(label, i, b, summary, results))
        page.episodes += _episode_records(b, results, headline, page.prompts)
    run_summary = folder.summary()
    parts.append(table_html(telemetry_table(run_summary)))
    parts.append(table_html(efficiency_table(run_summary)))
    ttft = [g.timings.ttft_s for r in all_results for g in r.generations if g.timings.ttft_s is not None]
    replies = run_summary.generations
    ttft_fig = page.figs.add(
        f"ttft_{i + 1}",
        histogram_plot,
        ttft,
        "Time to first token",
        "seconds",
        why=no_values(replies, "a first-token time"),
    )
    gpu_why = (gpu.reason if gpu and not gpu.available else None) or "fewer than two samples stored"
    gpu_fig = gpu_line(folder.gpu_samples(), gpu_why, page.figs, f"gpu_memory_{i + 1}")
    parts.append(f'<div class="plots">{ttft_fig}{gpu_fig}</div>')
    return "\n".join(parts), best


def _manifest_html(folder: RunFolder) -> str:
    """The run's heading and what it ran: model, decode, sampling, hardware, versions, data, status."""
    man = folder.manifest
    cfg, spec = man.config, man.config.model
    gpu = man.gpu_memory
    gpu_name = gpu.device_name if gpu and gpu.available else f"{NM} ({(gpu.reason or '') if gpu else ''})"
    manifest_rows = [
        ("Run", man.run_id),
        ("Model", f"{spec.name} ({spec.engine}, {spec.quantization})"),
        ("Decode / tool mode", f"{cfg.decode}{grammar_backend(man)} / {cfg.tool_mode}"),
        (
            "Sampling",
            f"not recorded (predictions re-scored by rig rescore), repeats {cfg.repeats}"
            if spec.engine == "external"
            else f"temperature {cfg.temperature}, seed {cfg.seed}, max tokens {cfg.max_tokens}, repeats {cfg.repeats}",
        ),
        ("Hardware", f"{man.host.cpu} x{man.host.cpu_count}; GPU {gpu_name}"),
        *(
            [("GPU readings", f"read on {gpu.watched()}, which may not be the model's device: {gpu.placement}")]
            if gpu is not None and gpu.placement
            else []
        ),
        ("Versions", ", ".join(f"{k} {v}" for k, v in man.versions.items())),
        ("Data", "; ".join(f"{b.name} {b.data_hash} ({b.data_path})" for b in cfg.benchmarks)),
        ("Status", man.status),
    ]
    return (
        f"<h2>{escape(spec.name)} — {escape(man.run_id)}</h2><table>"
        + "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in manifest_rows)
        + "</table>"
    )


def _episode_records(
    b: BenchmarkInfo, results: list[EpisodeResult], headline: dict[tuple[str, int], float], prompts: dict[str, str]
) -> list[dict[str, Any]]:
    """The episode browser's records of one benchmark; each episode's prompt added to ``prompts`` once, rebuilt
    from the recorded data (when the data has moved or changed, the prompt says so)."""
    texts, why = recorded_prompts(b)
    out = []
    for r in results:
        pkey = f"{b.name}/{r.episode_id}"
        if pkey not in prompts:
            prompts[pkey] = _clip(texts.get(r.episode_id, f"(prompt unavailable: {why or 'not in the data'})"))
        out.append(
            {
                "benchmark": r.benchmark,
                "id": r.episode_id,
                "repeat": r.repeat,
                "tags": r.tags,
                "scores": r.scores,
                "headline": headline.get((r.episode_id, r.repeat)),
                "status": r.status,
                "error_category": r.error_category,
                "error": (r.error or "")[:300],
                "prompt": pkey,
                "calls": [c.model_dump() for c in r.tool_calls],
                "gens": [
                    {
                        "text": _clip(g.text),
                        "pt": g.prompt_tokens,
                        "ct": g.completion_tokens,
                        "e2e": None if g.timings.e2e_s is None else round(g.timings.e2e_s, 3),
                        "fr": g.finish_reason,
                        "cf": g.call_form,
                    }
                    for g in r.generations
                ],
            }
        )
    return out


def _browser(episodes: list[dict[str, Any]]) -> str:
    """The episode browser's filters and table; its rows are drawn by the page's script from the JSON block."""
    cats = sorted({v for e in episodes for v in e["tags"].values() if len(v) < 40})
    benches = sorted({e["benchmark"] for e in episodes})
    return (
        '<h2>Episodes</h2><div id="filters">benchmark <select id="f_bench"><option value="">all</option>'
        + "".join(f"<option>{escape(b)}</option>" for b in benches)
        + '</select> category <select id="f_cat"><option value="">all</option>'
        + "".join(f"<option>{escape(c)}</option>" for c in cats)
        + '</select> outcome <select id="f_out"><option value="">all</option><option>correct</option><option>wrong'
        '</option><option>failed</option></select> search <input id="f_text" placeholder="id or error">'
        '<span id="count"></span> <button onclick="go(-1)">prev</button><span id="page"></span>'
        '<button onclick="go(1)">next</button></div><table><thead><tr><th>benchmark</th><th>episode</th>'
        "<th>tags</th><th>headline</th><th>scores</th><th>status</th><th>error</th></tr></thead>"
        '<tbody id="ep_body"></tbody></table>'
    )


def write_report_files(run_dir: Path) -> None:
    """report.md and report.html in the run folder, each appearing only once whole (``write_atomic``). A file that
    cannot be written is a RunFileError naming it (a StorageError on a full disk); the stored results are untouched,
    and `rig report` writes the files again."""
    for name, render in (("report.md", report_markdown), ("report.html", lambda d: html_report([d]))):
        path = run_dir / name
        try:
            write_atomic(path, render(run_dir))
        except OSError as e:
            full = storage_error(e, path)
            raise full or RunFileError(
                f"{path}: cannot write the report ({e.strerror}); the results are stored: `rig report {run_dir}` "
                "writes it again"
            ) from None
