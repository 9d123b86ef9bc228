"""Audit the token vocabulary Outlines builds for the embedded GGUF against llama.cpp's own pieces.

Writes benchmarks/results/outlines_vocab.md. Usage: python scripts/audit_outlines_vocab.py [--model NAME]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rig import offline
from rig.decoding.outlines_backend import audit_vocabulary
from rig.registry import load_registry, resolve_weights

ROWS = [
    ("token ids (llama.cpp)", "n_vocab"),
    ("entries in Outlines' LlamaCppTokenizer vocabulary (outlines_core path)", "outlines_entries"),
    ("ids missing from it", "outlines_missing"),
    ("... dropped: piece longer than Outlines' 32-byte buffer", "dropped_over_buffer"),
    ("... longest dropped piece, bytes", "dropped_max_bytes"),
    ("... overwritten by another id decoding to the same string", "collided"),
    ("... ... with no surviving id of the same bytes (lossy)", "collided_lossy"),
    ("ids kept under a string whose bytes differ from the piece", "misencoded_kept"),
    ("control tokens kept as text", "control_as_text"),
    ("missing/misencoded ids that are printable ASCII", "affected_ascii"),
    ("tokens spelling the sample JSON/YAML documents", "sample_tokens"),
    ("... of those affected, ASCII documents", "sample_affected_ascii"),
    ("... of those affected, non-ASCII documents", "sample_affected_non_ascii"),
    ("llguidance tokenizer size (Outlines' llguidance backend, used by rig)", "llguidance_tokens"),
    ("llguidance pieces differing from llama.cpp's, possible in UTF-8 text", "llguidance_mismatches_utf8"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/outlines_vocab.md"))
    a = ap.parse_args()
    offline.install()
    import llama_cpp

    reg = load_registry()
    spec = reg.get(a.model)
    llm = llama_cpp.Llama(resolve_weights(spec, reg.path), n_ctx=256, verbose=False)
    au = audit_vocabulary(llm)
    lines = [
        f"# Outlines' view of the {a.model} vocabulary (llama-cpp-python {llama_cpp.__version__})",
        "",
        "Produced by `scripts/audit_outlines_vocab.py`: every token id's piece from llama.cpp compared with the "
        "vocabulary Outlines 1.3.3 builds for a `llama_cpp.Llama` (its `LlamaCppTokenizer`, used by the "
        "outlines_core JSON/regex backend) and with the llguidance tokenizer its `llguidance` backend builds. "
        "rig's `constraint_backend: outlines` uses the llguidance one and refuses a model where it is wrong.",
        "",
        "| measure | count |",
        "|---|---|",
        *[f"| {label} | {getattr(au, key)} |" for label, key in ROWS],
        "",
        f"Outlines' own tokenizer byte-exact: **{au.outlines_tokenizer_ok}**; llguidance tokenizer byte-exact "
        f"for UTF-8 text: **{au.llguidance_tokenizer_ok}**.",
        "",
        "Sample tokens Outlines' own vocabulary gets wrong (id, llama.cpp piece -> id Outlines keeps for that string):",
        "",
        *[f"- `{s}`" for s in au.sample_affected],
        "",
    ]
    a.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
