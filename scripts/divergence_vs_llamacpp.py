"""rig's KL divergence against llama.cpp's own tool on the same token sequences.

`llama-perplexity --kl-divergence-base BASE` evaluates the reference model on a text cut into chunks of `-c` tokens and
stores, for the second half of each chunk, the reference's log-probabilities (quantised to 16 bits) with the tokens;
`llama-perplexity --kl-divergence` then evaluates a variant on those tokens and prints the mean KLD and "Same top p".
This script runs both, reads the tokens back from BASE, and computes the same positions with rig's scorer
(`rig.engines.llamacpp_logits`: full vocabulary, float64), so the two figures are over identical sequences.

The text: every stored reply of a reference run folder (`--run`), or text files (`--text`, e.g. the benchmark's own
data files, which its prompts are built from). Build the tool from the llama.cpp sources that llama-cpp-python
vendors, with the same CPU flags as the Python build (see the README), target `llama-perplexity`.

    python scripts/divergence_vs_llamacpp.py --perplexity build/bin/llama-perplexity --models variants/models.yaml \
        --reference gemma3-270m --variants gemma3-270m-q8_0,gemma3-270m-q4_0 --run runs/ID --out agreement.md
"""

from __future__ import annotations

import argparse
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from rig.engines.llamacpp_logits import LogitScorer
from rig.engines.logits import compare
from rig.registry import load_registry, resolve_weights


def weights(name: str, models: str) -> str:
    reg = load_registry(Path(models))
    return resolve_weights(reg.get(name), models)


def run_text(run: Path) -> str:
    """Every stored reply of a run, in order: the benchmark's own answers (prompts are not stored, only their hash)."""
    from rig.runformat import read_results

    return "\n".join(g.text for r in read_results(run / "results.sqlite") for g in r.generations if g.text)


def tool(argv: list[str]) -> str:
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(argv)}\n{p.stderr[-3000:]}")
    return p.stdout + p.stderr


def base_tokens(path: Path) -> tuple[int, int, np.ndarray]:
    """(n_ctx, n_chunk, tokens) from a --kl-divergence-base file: b'_logits_', u32 n_ctx, i32 n_vocab, i32 n_chunk,
    then n_ctx * n_chunk int32 tokens (the log-probabilities follow)."""
    with path.open("rb") as f:
        if f.read(8) != b"_logits_":
            sys.exit(f"{path}: not a llama-perplexity log-probability file")
        n_ctx, _n_vocab, n_chunk = struct.unpack("<Iii", f.read(12))
        toks = np.frombuffer(f.read(4 * n_ctx * n_chunk), dtype="<i4")
    return n_ctx, n_chunk, toks.reshape(n_chunk, n_ctx)


def parse_tool(out: str) -> tuple[float, float]:
    kld = re.search(r"Mean\s+KLD:\s+(-?[0-9.]+)", out)
    top = re.search(r"Same top p:\s+([0-9.]+)\s*±", out)
    if not kld or not top:
        sys.exit(f"could not find Mean KLD / Same top p in llama-perplexity's output:\n{out[-3000:]}")
    return float(kld.group(1)), float(top.group(1)) / 100


def rig_figures(ref: LogitScorer, var: LogitScorer, chunks: np.ndarray, bos: int | None) -> tuple[float, float, int]:
    """Mean KLD and top-1 agreement over the positions llama-perplexity scores: in each chunk (first token replaced by
    BOS when the vocabulary adds one) the logits at positions n_ctx/2 .. n_ctx-2, predicting the next token."""
    klds: list[float] = []
    agree = 0
    for row in chunks:
        seq = [int(t) for t in row]
        if bos is not None:
            seq[0] = bos
        first = len(seq) // 2 + 1  # rows() yields the logits predicting seq[first:], i.e. from position first - 1
        for (start, r), (_, v) in zip(ref.rows(seq, first), var.rows(seq, first), strict=True):
            for kld, same, _, _ in compare(r, v, seq[start : start + len(r)]):
                klds.append(kld)
                agree += same
    return float(np.mean(klds)), agree / len(klds), len(klds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--perplexity", required=True, help="the llama-perplexity binary")
    ap.add_argument("--models", required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--variants", required=True, help="comma-separated models.yaml names")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", type=Path, help="a reference run folder: its stored prompts and replies are the text")
    src.add_argument("--text", type=Path, nargs="+", help="text files, concatenated (e.g. a CallNavi data file)")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rig-kld-"))
    text = work / "text.txt"
    text.write_text(run_text(a.run) if a.run else "\n".join(p.read_text() for p in a.text))
    base = work / "base.kld"
    common = ["-c", str(a.ctx), "--chunks", str(a.chunks), "-t", str(a.threads), "-b", str(a.ctx)]
    ref_w = weights(a.reference, a.models)
    tool([a.perplexity, "-m", ref_w, "-f", str(text), "--kl-divergence-base", str(base), *common])
    n_ctx, n_chunk, chunks = base_tokens(base)
    ref = LogitScorer(ref_w, n_ctx, n_threads=a.threads, chunk=64)
    bos = ref.llm.token_bos() if ref.llm._model.add_bos_token() else None
    rows = []
    for name in a.variants.split(","):
        var_w = weights(name, a.models)
        out = tool([a.perplexity, "-m", var_w, "--kl-divergence-base", str(base), "--kl-divergence", *common])
        t_kld, t_top = parse_tool(out)
        var = LogitScorer(var_w, n_ctx, n_threads=a.threads, chunk=64)
        try:
            r_kld, r_top, n = rig_figures(ref, var, chunks, bos)
        finally:
            var.close()
        rows.append(
            f"| {name} | {n} | {t_kld:.6f} | {r_kld:.6f} | {r_kld / t_kld - 1:+.2%} | {t_top:.4f} | {r_top:.4f} | "
            f"{r_top / t_top - 1:+.2%} |"
        )
        print(rows[-1], flush=True)
    ref.close()
    source = "the stored replies of a run" if a.run else ", ".join(f"{p.parent.name}/{p.name}" for p in a.text)
    md = "\n".join(
        [
            f"Reference {a.reference}; {n_chunk} chunks of {n_ctx} tokens from "
            f"{source}; "
            "the second half of each chunk scored (llama-perplexity's positions).",
            "",
            "| variant | positions | llama-perplexity mean KLD | rig mean KLD | rig / tool - 1 | tool same top p | "
            "rig top-1 agreement | rig / tool - 1 |",
            "|---|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    print(md)
    if a.out:
        a.out.write_text(md)


if __name__ == "__main__":
    main()
