"""What xgrammar (vLLM's default grammar backend) pays per generated token to mask the vocabulary, by repetition.

rig's JSON grammars bound strings with counted repetitions (``string-char{0,N}`` for a schema's maxLength); the
think block of ``thinking: strip`` once had ``{0,4000}``. xgrammar masks the whole vocabulary at every step; its
precomputed per-rule masks do not cover a position inside a counted repetition, so the cost there depends on N.
This walks a matcher token by token through a string (the embedded Gemma vocabulary, 262,144 tokens, read from the
GGUF) and reports the median time of ``fill_next_token_bitmask`` per token, median over --passes passes, and
the compile time. The same bounds as chains of optional rules show what avoiding the counted repetition costs.

    python scripts/bench_xgrammar_mask.py [--passes 3] [--out benchmarks/results/xgrammar_mask.md]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's rig, not another installed one
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_grammar import embedded_vocab, xgrammar_compiler

REPO = Path(__file__).resolve().parents[1]
CHAR = r'c ::= [^\x22\x5c\x00-\x1f] | "\\" [\x22\x5c\x2f\x62\x66nrt]' + "\n"
TEXT = "Kauppatori market square by the harbour, then along the Esplanadi park to the railway station. " * 3
WALK = 48  # characters walked: about ten tokens, since a slow row costs seconds per token
THINK = 'c ::= [^<] | "<" [^/] | "</" [^t] | "</t" [^h]\n'


def chain(n: int) -> str:
    """``c{0,n}`` without a counted repetition: ``sK ::= (c sK-1)?`` down to ``s1 ::= c?``."""
    return "".join(f"s{k} ::= (c s{k - 1})?\n" for k in range(n, 1, -1)) + "s1 ::= c?\n"


def chunked(n: int, k: int) -> tuple[str, str]:
    """``c{0,n}`` in about n/k + k rules: a rule of k characters used n // k times, then a chain for the rest.

    ``chain(n)`` compiles in about one vocabulary scan per rule, so this takes a fraction of its time; but whether
    the next character starts another chunk or the last short run stays open until the string ends, so the matcher
    keeps more than one stack."""
    q, r = divmod(n, k)
    rules = "chunk ::= " + " ".join(["c"] * k) + "\n"
    rules += "".join(f"t{j} ::= (c t{j - 1})?\n" for j in range(k - 1, 1, -1)) + "t1 ::= c?\n"
    rules += f"u0 ::= t{r}\n" if r else 'u0 ::= ""\n'
    rules += "".join(f"u{j} ::= chunk u{j - 1} | t{k - 1}\n" for j in range(1, q + 1))
    return f"u{q}", rules


def cases() -> list[tuple[str, str, str, int | None]]:
    """(label, grammar, text walked, the string's bound if it has one)."""
    out = []
    for n in (24, 120, 128, 129, 256):
        out.append((f"string `c{{0,{n}}}`", f'root ::= "\\"" c{{0,{n}}} "\\""\n' + CHAR, '"' + TEXT[: min(n, WALK)], n))
    out.append(("string `c*`", 'root ::= "\\"" c* "\\""\n' + CHAR, '"' + TEXT[:WALK], None))
    for n in (24, 120, 1200):  # the same bound as a chain of optional rules: no counted repetition
        out.append(
            (
                f"string `c{{0,{n}}}` as {n} chained rules",
                'root ::= "\\"" s' + str(n) + ' "\\""\n' + chain(n) + CHAR,
                '"' + TEXT[: min(n, WALK)],
                n,
            )
        )
    for n, k in ((24, 5), (120, 11), (1200, 35)):  # two levels: fewer rules, but more than one stack
        top, rules = chunked(n, k)
        out.append(
            (
                f"string `c{{0,{n}}}` as chunks of {k} (two levels)",
                'root ::= "\\"" ' + top + ' "\\""\n' + rules + CHAR,
                '"' + TEXT[: min(n, WALK)],
                n,
            )
        )
    think = "<think>" + TEXT[:WALK]
    out.append(
        ("think block `{0,4000}` (before)", 'root ::= "<think>" c{0,4000} "</think>" "x"\n' + THINK, think, None)
    )
    out.append(("think block `*` (now)", 'root ::= "<think>" c* "</think>" "x"\n' + THINK, think, None))
    return out


def main(argv: list[str] | None = None) -> int:
    import xgrammar

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "xgrammar_mask.md")
    args = ap.parse_args(argv)

    tok = embedded_vocab()  # one read of the GGUF: the compiler's vocabulary and the tokenizer of the texts
    compiler, n_vocab = xgrammar_compiler(tok)
    mask = xgrammar.allocate_token_bitmask(1, n_vocab)
    rows = []
    for label, grammar, text, bound in cases():
        ids = tok.tokenize(text.encode(), add_bos=False, special=False)
        t0 = time.perf_counter()
        compiled = compiler.compile_grammar(grammar)
        compile_s = time.perf_counter() - t0
        if bound is not None:  # the grammar really is the bound: n characters pass, n + 1 do not
            for n, ok in ((bound, True), (bound + 1, False)):
                if xgrammar.GrammarMatcher(compiled).accept_string('"' + "a" * n + '"') != ok:
                    raise SystemExit(f"{label}: a string of {n} characters is {'refused' if ok else 'accepted'}")
        matcher = xgrammar.GrammarMatcher(compiled)
        per_pass = []
        for _ in range(args.passes):
            matcher.reset()
            times = []
            for t in ids:
                t0 = time.perf_counter()
                matcher.fill_next_token_bitmask(mask)
                times.append(time.perf_counter() - t0)
                if not matcher.accept_token(t):
                    raise SystemExit(f"{label}: the grammar refused token {t} of its own text")
            per_pass.append(statistics.median(times))
        ms = statistics.median(per_pass) * 1000
        passes = ", ".join(f"{p * 1000:.2f}" for p in per_pass)
        rows.append(f"| {label} | {compile_s:.2f} | {len(ids)} | {ms:.2f} | {passes} |")
        print(rows[-1], flush=True)
    tok.close()
    md = [
        "# xgrammar's mask per token, by repetition (vLLM's grammar backend)",
        "",
        f"Written by `scripts/bench_xgrammar_mask.py`: xgrammar {version('xgrammar')} over the embedded Gemma "
        f"vocabulary ({n_vocab:,} tokens), one thread, {platform.machine()} CPU; a matcher walked token by token "
        "through the text; per-token time of `fill_next_token_bitmask`, median per pass, then the median of "
        f"{args.passes} passes. Shared, noisy host: compare rows, not absolute times.",
        "",
        "| grammar | compile (s) | tokens walked | mask ms/token (median) | per pass |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    args.out.write_text("\n".join(md))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
