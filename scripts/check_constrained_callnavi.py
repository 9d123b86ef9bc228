"""Do constrained JSON and YAML answers parse and validate on every CallNavi question? (issue 3's check)

For each question (params task: API names and parameters), in a seeded random order (chunk by chunk) so that a
partial run is a random sample, four generations with the embedded model on llama.cpp: JSON constrained, JSON
unconstrained, YAML constrained, YAML unconstrained (same prompt per format). Each result is appended to a JSONL
file as it finishes, so the check can be stopped and resumed (``--resume``); the summary is rebuilt from the file.

A constrained output that stopped on its own and does not parse would be a grammar bug; one cut at max_tokens is
counted apart (the grammar cannot make a too-short budget suffice). Unconstrained generations mostly run to
max_tokens; ``--unconstrained-every N`` samples them on every Nth question only.

    python scripts/check_constrained_callnavi.py --data ../shared/data/callnavi [--limit N] [--resume]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections import Counter
from pathlib import Path

from rig import offline
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.benchmarks.callnavi.prompts import MAX_CALLS, MAX_VALUE_CHARS
from rig.decoding import parse_output
from rig.engines import create_engine
from rig.records import ChatRequest, Sampling
from rig.registry import load_registry, resolve_weights

FORMATS = ("json", "yaml")


def summary(rows: list[dict], total: int, max_tokens: int, model: str, threads: int) -> str:
    questions = len({r["question"] for r in rows})
    lines = [
        f"# Constrained CallNavi answers: parse and validate ({model}, llama.cpp, CPU)",
        "",
        "Written by `scripts/check_constrained_callnavi.py`: params task (API names and parameters), the "
        "schema of each question's API list (`rig.benchmarks.callnavi.prompts.answer_schema`: one argument "
        f"object per API, at most {MAX_CALLS} calls, values at most {MAX_VALUE_CHARS} characters); "
        f"max_tokens {max_tokens}; greedy; llama.cpp's own grammar sampler, checked lazily (the engine's "
        f"default); {threads} decode threads; questions in a seeded random order, run in chunks, each chunk "
        "grouped by domain.",
        "",
        f"Questions done: **{questions} of {total}**.",
        "",
        "| format | decoding | generations | parse + validate | stopped on its own, not valid | "
        "cut at max_tokens | engine errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for fmt in FORMATS:
        for mode in ("constrained", "unconstrained"):
            rs = [r for r in rows if r["format"] == fmt and r["mode"] == mode]
            ok = sum(r["valid"] for r in rs)
            bad_stop = sum(not r["valid"] and r["finish"] == "stop" and not r["error"] for r in rs)
            cut = sum(not r["valid"] and r["finish"] == "length" for r in rs)
            err = sum(bool(r["error"]) for r in rs)
            pct = f" ({100 * ok / len(rs):.1f}%)" if rs else ""
            lines.append(f"| {fmt} | {mode} | {len(rs)} | {ok}{pct} | {bad_stop} | {cut} | {err} |")
    con = [r for r in rows if r["mode"] == "constrained"]
    stopped = [r for r in con if r["finish"] == "stop" and not r["error"]]
    lines += [
        "",
        f"Constrained outputs that ended on their own: {sum(r['valid'] for r in stopped)} of {len(stopped)} "
        "parse and validate; the others were cut at max_tokens (a constraint cannot make a short budget "
        "enough) or failed in the engine, as counted above.",
        "",
    ]
    for fmt in FORMATS:
        toks = sorted(r["tokens"] or 0 for r in con if r["format"] == fmt and r["finish"] == "stop")
        if toks:
            lines.append(
                f"{fmt.upper()} constrained outputs that ended on their own: median {toks[len(toks) // 2]} "
                f"tokens, longest {toks[-1]}; {sum(t > 256 for t in toks)} longer than 256 (the embedded "
                "model entry's default max_tokens)."
            )
    reasons = Counter(r["reason"].split(":")[0] for r in rows if r["mode"] == "constrained" and not r["valid"])
    if reasons:
        lines += ["", "Constrained failures by first reason: " + ", ".join(f"{k} {v}" for k, v in reasons.items())]
    return "\n".join(lines) + "\n"


async def run(a: argparse.Namespace) -> None:
    reg = load_registry()
    spec = reg.get(a.model)
    if a.threads:
        spec = spec.model_copy(update={"engine_args": {**spec.engine_args, "n_threads": a.threads}})
    benches = {fmt: CallNavi(a.data, {"format": fmt, "task": "params"}) for fmt in FORMATS}
    eps = {fmt: {e.id: e for e in b.episodes()} for fmt, b in benches.items()}
    ids = sorted(eps["json"])
    random.Random(a.seed).shuffle(ids)
    ids = ids[: a.limit] if a.limit else ids
    done: set[tuple[str, str, str]] = set()
    if a.resume and a.jsonl.exists():
        done = {(r["question"], r["format"], r["mode"]) for r in map(json.loads, a.jsonl.read_text().splitlines())}
    elif a.jsonl.exists():
        a.jsonl.unlink()
    eng = create_engine(spec, resolve_weights(spec, reg.path))
    await eng.load()
    t0 = time.perf_counter()
    try:
        with a.jsonl.open("a") as out:
            for start in range(0, len(ids), a.chunk):
                # Within a chunk: one format at a time, questions of one API list together, so llama.cpp reuses
                # the shared prompt prefix; across chunks the order stays random.
                chunk = sorted(ids[start : start + a.chunk], key=lambda q: (eps["json"][q].prefix_group, q))
                for fmt, qid in ((f, q) for f in FORMATS for q in chunk):
                    ep, bench = eps[fmt][qid], benches[fmt]
                    schema_c = bench.constraint_for(ep, fmt)
                    with_plain = ids.index(qid) % a.unconstrained_every == 0
                    for mode in ("constrained", "unconstrained") if with_plain else ("constrained",):
                        if (qid, fmt, mode) in done:
                            continue
                        c = schema_c if mode == "constrained" else None
                        g = await eng.chat(
                            ChatRequest(messages=ep.messages, constraint=c, sampling=Sampling(max_tokens=a.max_tokens))
                        )
                        _value, err = parse_output(g.text, schema_c)
                        valid = err is None and not g.error
                        row = {
                            "question": qid,
                            "format": fmt,
                            "mode": mode,
                            "valid": valid,
                            "finish": g.finish_reason,
                            "tokens": g.completion_tokens,
                            "error": g.error,
                            "reason": g.error or err or "",
                        }
                        if mode == "constrained" and not valid:
                            row["text"] = g.text  # to tell a looping model from a grammar fault
                        out.write(json.dumps(row) + "\n")
                        out.flush()
                print(
                    f"{min(start + a.chunk, len(ids))}/{len(ids)} questions, {time.perf_counter() - t0:.0f} s",
                    flush=True,
                )
    finally:
        await eng.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="the upstream CallNavi folder")
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--limit", type=int, default=0, help="questions to run (0: all)")
    ap.add_argument("--max-tokens", type=int, default=384, help="default: CallNavi's own cap for the params task")
    ap.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="llama.cpp decode threads (llama-cpp-python's default is half the CPUs)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--unconstrained-every",
        type=int,
        default=1,
        help="unconstrained generations only for every Nth question (they run to max_tokens: slow)",
    )
    ap.add_argument("--chunk", type=int, default=24, help="questions per chunk (prefix reuse inside a chunk)")
    ap.add_argument("--resume", action="store_true", help="keep the JSONL file and skip what it holds")
    ap.add_argument("--summary-only", action="store_true", help="rebuild the summary from the JSONL file, run nothing")
    ap.add_argument("--remark", default="", help="a line appended to the summary (how this run was done)")
    ap.add_argument("--jsonl", type=Path, default=Path("benchmarks/results/constrained_callnavi.jsonl"))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/constrained_callnavi.md"))
    a = ap.parse_args()
    offline.install()
    total = len({e.id for e in CallNavi(a.data, {"format": "json", "task": "params"}).episodes()})
    try:
        if not a.summary_only:
            asyncio.run(run(a))
    finally:
        rows = [json.loads(x) for x in a.jsonl.read_text().splitlines()] if a.jsonl.exists() else []
        a.out.write_text(
            summary(rows, total, a.max_tokens, a.model, a.threads) + (f"\n{a.remark}\n" if a.remark else "")
        )
        print(a.out.read_text())


if __name__ == "__main__":
    main()
