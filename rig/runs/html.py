"""Self-contained HTML report: no network (styles, scripts and SVG plots inline).

Episodes are embedded once as JSON and paged by a small inline script, so a 10,000-episode run opens quickly.
Long prompts are clipped in the browser view (head and tail kept, the cut is stated); the store keeps them whole.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from rig.benchmarks import benchmark_tables, recorded_prompts
from rig.benchmarks.base import Table
from rig.runs.plots import scatter_svg
from rig.runs.report import NM, ci_table, fmt, telemetry_table
from rig.runs.store import Store, open_manifest
from rig.runs.summary import benchmark_of, summarize

CLIP_HEAD, CLIP_TAIL = 300, 900
# The page may fetch nothing at all: any attempt is blocked and shows as a console error.
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px}
th{background:#f3f3f3}.note{color:#555;font-size:12px;font-style:italic}pre{white-space:pre-wrap;background:#f8f8f8;
padding:6px;font-size:12px;max-height:360px;overflow:auto}.ok{color:#176b2c}.bad{color:#a31b1b}
#filters input,#filters select{margin-right:10px}.plots{display:flex;flex-wrap:wrap;gap:16px}"""

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
function render(){const rows=EP.filter(matches);const n=rows.length;const start=page*PER;
 document.getElementById('count').textContent=n+' episodes match';
 const body=rows.slice(start,start+PER).map(e=>`<tr><td>${esc(e.benchmark)}</td><td><details><summary>\
${esc(e.id)} #${e.repeat}</summary>
 <b>Prompt</b><pre>${esc(DATA.prompts[e.prompt])}</pre>${e.gens.map((g,i)=>`<b>Generation ${i+1}</b>\
 (${g.pt??'–'} prompt / ${g.ct??'–'} completion tokens, ${g.e2e??'–'} s)<pre>${esc(g.text)}</pre>`).join('')}
 ${e.calls.length?'<b>Tool calls</b><pre>'+esc(JSON.stringify(e.calls,null,1))+'</pre>':''}</details></td>
 <td>${esc(Object.entries(e.tags).map(([k,v])=>k+'='+v).join(', '))}</td><td class="${e.headline>=0.5?'ok':'bad'}">\
${e.headline??'–'}</td>
 <td>${esc(JSON.stringify(e.scores))}</td><td>${esc(e.status)}</td><td>${esc(e.error_category||'')}</td></tr>\
`).join('');
 document.getElementById('ep_body').innerHTML=body;
 document.getElementById('page').textContent=`page ${page+1} of ${Math.max(1,Math.ceil(n/PER))}`}
function go(d){page=Math.max(0,page+d);render()}
for(const id of ['f_bench','f_cat','f_out','f_text'])document.getElementById(id).addEventListener('input',()=>{page=0;\
render()});
render();"""


def _table_html(t: Table) -> str:
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


def histogram_svg(values: list[float], title: str, x_label: str, bins: int = 20, width: int = 560,
                  height: int = 220) -> str:
    if not values:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="40"><text x="8" y="24">'
                f'{escape(title)}: {NM}</text></svg>')
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / span * bins))] += 1
    top = max(counts)
    bw = (width - 60) / bins
    bars = "".join(
        f'<rect x="{50 + i * bw:.1f}" y="{height - 35 - c / top * (height - 65):.1f}" width="{bw - 1:.1f}" '
        f'height="{c / top * (height - 65):.1f}" fill="#2a6fdb"><title>{c}</title></rect>'
        for i, c in enumerate(counts))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
            f'font-size="11"><text x="{width / 2}" y="14" text-anchor="middle" font-size="13">{escape(title)}</text>'
            f'{bars}<line x1="50" y1="{height - 35}" x2="{width - 10}" y2="{height - 35}" stroke="#333"/>'
            f'<text x="50" y="{height - 20}">{lo:.3g}</text>'
            f'<text x="{width - 10}" y="{height - 20}" text-anchor="end">{hi:.3g}</text>'
            f'<text x="{width / 2}" y="{height - 5}" text-anchor="middle">{escape(x_label)}</text></svg>')


def gpu_line_svg(samples: list[tuple[float, int]], width: int = 560, height: int = 220) -> str:
    if len(samples) < 2:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="40"><text x="8" y="24">'
                f'GPU memory over time: {NM}</text></svg>')
    t0 = samples[0][0]
    pts = [(t - t0, b / 2**30) for t, b in samples]
    return scatter_svg([("", x, y) for x, y in pts[:: max(1, len(pts) // 300)]], "seconds", "GiB used",
                       "GPU memory over time", width, height).replace('r="5"', 'r="1.5"')


def html_report(run_dirs: list[Path]) -> str:
    sections: list[str] = []
    episodes: list[dict[str, Any]] = []
    pareto: list[tuple[str, float | None, float, float]] = []  # (model, latency p50, accuracy, peak memory GiB)
    prompt_text: dict[str, str] = {}  # one copy per episode, shared by its repeats
    for run_dir in run_dirs:
        man = open_manifest(run_dir)
        store = Store(run_dir / "results.sqlite", readonly=True)
        try:
            cfg, spec = man.config, man.config.model
            gpu = man.gpu_memory
            gpu_name = gpu.device_name if gpu and gpu.available else f"{NM} ({(gpu.reason or '') if gpu else ''})"
            manifest_rows = [
                ("Run", man.run_id), ("Model", f"{spec.name} ({spec.engine}, {spec.quantization})"),
                ("Decode / tool mode", f"{cfg.decode} / {cfg.tool_mode}"),
                ("Sampling", f"not recorded (predictions re-scored by rig rescore), repeats {cfg.repeats}"
                 if spec.engine == "external" else
                 f"temperature {cfg.temperature}, seed {cfg.seed}, max tokens {cfg.max_tokens}, repeats {cfg.repeats}"),
                ("Hardware", f"{man.host.cpu} x{man.host.cpu_count}; GPU {gpu_name}"),
                ("Versions", ", ".join(f"{k} {v}" for k, v in man.versions.items())),
                ("Data", "; ".join(f"{b.name} {b.data_hash} ({b.data_path})" for b in cfg.benchmarks)),
                ("Status", man.status)]
            parts = [f"<h2>{escape(spec.name)} — {escape(man.run_id)}</h2><table>" +
                     "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in manifest_rows) +
                     "</table>"]
            all_results = []
            accuracy = None  # the run's point on the across-runs plots: its last benchmark with a headline CI
            for b in cfg.benchmarks:
                results = store.results(b.name)
                all_results += results
                bench = benchmark_of(b)
                parts += [_table_html(t) for t in benchmark_tables(b, results, label=spec.name)]
                summary = summarize(man, results, b, bench.headline)
                ci = ci_table(summary, spec.name)
                if ci:
                    parts.append(_table_html(ci))
                    accuracy = summary.headline.mean if summary.headline else None
                headline = summary.headline.by_episode() if summary.headline else {}
                prompts = recorded_prompts(b)  # {} when the data has moved: each prompt then says so
                for r in results:
                    pkey = f"{b.name}/{r.episode_id}"
                    if pkey not in prompt_text:
                        prompt_text[pkey] = _clip(prompts.get(r.episode_id,
                                                              f"(prompt unavailable: {b.data_path} not readable)"))
                    episodes.append({
                        "benchmark": r.benchmark, "id": r.episode_id, "repeat": r.repeat, "tags": r.tags,
                        "scores": r.scores, "headline": headline.get((r.episode_id, r.repeat)), "status": r.status,
                        "error_category": r.error_category, "error": (r.error or "")[:300],
                        "prompt": pkey, "calls": [c.model_dump() for c in r.tool_calls],
                        "gens": [{"text": _clip(g.text), "pt": g.prompt_tokens, "ct": g.completion_tokens,
                                  "e2e": None if g.timings.e2e_s is None else round(g.timings.e2e_s, 3)}
                                 for g in r.generations]})
            run_summary = summarize(man, all_results)
            parts.append(_table_html(telemetry_table(run_summary)))
            e2e = [g.timings.e2e_s for r in all_results for g in r.generations if g.timings.e2e_s is not None]
            ttft = [g.timings.ttft_s for r in all_results for g in r.generations if g.timings.ttft_s is not None]
            samples = [(t, b) for t, b in store.conn.execute("SELECT t, used_bytes FROM gpu_samples ORDER BY t")]
            parts.append('<div class="plots">' + histogram_svg(e2e, "End-to-end latency", "seconds") +
                         histogram_svg(ttft, "Time to first token", "seconds") + gpu_line_svg(samples) + "</div>")
            if accuracy is not None:
                memory = run_summary.gpu_peak_bytes or run_summary.peak_rss_bytes or 0
                pareto.append((spec.name, run_summary.e2e_p50_s, accuracy, memory / 2**30))
            sections.append("\n".join(parts))
        finally:
            store.close()
    pareto_html = ""
    if len(pareto) > 1:
        pareto_html = ('<h2>Across runs</h2><div class="plots">' +
                       scatter_svg([(n, lat, acc) for n, lat, acc, _m in pareto], "latency p50 (s)", "accuracy",
                                   "Accuracy against latency") +
                       scatter_svg([(n, m, acc) for n, _l, acc, m in pareto], "peak memory (GiB)", "accuracy",
                                   "Accuracy against peak memory") + "</div>")
    cats = sorted({v for e in episodes for v in e["tags"].values() if len(v) < 40})
    benches = sorted({e["benchmark"] for e in episodes})
    browser = (
        '<h2>Episodes</h2><div id="filters">benchmark <select id="f_bench"><option value="">all</option>' +
        "".join(f"<option>{escape(b)}</option>" for b in benches) +
        '</select> category <select id="f_cat"><option value="">all</option>' +
        "".join(f"<option>{escape(c)}</option>" for c in cats) +
        '</select> outcome <select id="f_out"><option value="">all</option><option>correct</option><option>wrong'
        '</option><option>failed</option></select> search <input id="f_text" placeholder="id or error">'
        '<span id="count"></span> <button onclick="go(-1)">prev</button><span id="page"></span>'
        '<button onclick="go(1)">next</button></div><table><thead><tr><th>benchmark</th><th>episode</th>'
        '<th>tags</th><th>headline</th><th>scores</th><th>status</th><th>error</th></tr></thead>'
        '<tbody id="ep_body"></tbody></table>')
    # Every "<" as \u003c (JSON.parse reads it back): "</script>", "<!--" and "<script" cannot end the block or
    # switch the HTML parser into a script-data escape state that swallows the rest of the page.
    data = json.dumps({"prompts": prompt_text, "episodes": episodes}, ensure_ascii=False).replace("<", "\\u003c")
    return (f'<!doctype html><html><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>rig report</title>'
            f'<style>{CSS}</style></head>'
            f'<body><h1>rig report</h1>{pareto_html}{"".join(sections)}{browser}'
            f'<script type="application/json" id="episodes">{data}</script><script>{JS}</script></body></html>')

