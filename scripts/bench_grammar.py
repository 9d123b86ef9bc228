"""Time grammar generation for the largest CallNavi API list (telecommunications, 101 APIs).

Three answer schemas: "names" (API names as an enum, parameters as free objects), "per_api" (parameters items
are anyOf the APIs' own closed parameter objects) and "benchmark" (what ``rig bench --decode`` sends for the
params task: ``callnavi.prompts.answer_schema``, one argument object per listed API). Reports the median of
--repeat fresh generations (no caching) per schema x output format x grammar syntax; target < 1 s each.

With --xgrammar, also times what vLLM's default backend does with each GBNF before the first token: xgrammar
compiling it against the embedded Gemma vocabulary (262,144 tokens, read from the GGUF, no weights loaded).
vLLM caches compiled grammars, so this is paid once per distinct grammar.

    python scripts/bench_grammar.py [--data ../shared/data/callnavi] [--domain telecommunications] [--xgrammar]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's rig, not another installed one

from rig.decoding import json_schema_to_gbnf, json_schema_to_lark, yaml_schema_to_gbnf, yaml_schema_to_lark

REPO = Path(__file__).resolve().parents[1]

TARGET_S = 1.0


def schemas(data: Path, domain: str) -> dict[str, dict]:
    apis = json.loads((data / "APIs" / f"{domain}.json").read_text())["api_ports"]
    names = list(dict.fromkeys(a["name"] for a in apis))
    names_schema = {
        "type": "object",
        "properties": {
            "API": {"type": "array", "items": {"type": "string", "enum": names}},
            "parameters": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["API", "parameters"],
        "additionalProperties": False,
    }
    per_api = json.loads(json.dumps(names_schema))
    per_api["properties"]["parameters"]["items"] = {
        "anyOf": [
            {
                "type": "object",
                "properties": {k: {} for k in a["parameters"]},
                "required": list(a["parameters"]),
                "additionalProperties": False,
            }
            for a in apis
        ]
    }
    from rig.benchmarks.callnavi.data import load_domain
    from rig.benchmarks.callnavi.prompts import answer_schema

    bench = answer_schema(load_domain(data, domain).apis, "params")
    return {"names": names_schema, "per_api": per_api, "benchmark": bench}


def embedded_vocab():  # type: ignore[no-untyped-def]
    """The embedded model's vocabulary, read from its GGUF without weights (the caller closes it)."""
    import llama_cpp

    from rig.registry import load_registry, resolve_weights

    reg = load_registry(REPO / "models.yaml")
    return llama_cpp.Llama(model_path=resolve_weights(reg.get("gemma3-270m"), reg.path), vocab_only=True, verbose=False)


def xgrammar_compiler(llm=None):  # type: ignore[no-untyped-def]
    """An xgrammar compiler over the embedded model's vocabulary, as vLLM builds one for a served model."""
    import xgrammar

    own = llm is None
    llm = embedded_vocab() if own else llm
    vocab = [llm.detokenize([t], special=True) for t in range(llm.n_vocab())]
    info = xgrammar.TokenizerInfo(vocab, stop_token_ids=[llm.token_eos()])
    if own:
        llm.close()
    return xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False), len(vocab)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data",
        type=Path,
        default=REPO.parent / "shared" / "data" / "callnavi",
        help="CallNavi dataset folder (default: ../shared/data/callnavi beside the repository)",
    )
    ap.add_argument("--domain", default="telecommunications")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--xgrammar", action="store_true", help="also time xgrammar compiling each GBNF (vLLM's path)")
    args = ap.parse_args(argv)
    if not (args.data / "APIs").is_dir():
        print(f"CallNavi data not found at {args.data}", file=sys.stderr)
        return 2
    generators = {
        ("json", "gbnf"): json_schema_to_gbnf,
        ("json", "lark"): json_schema_to_lark,
        ("yaml", "gbnf"): yaml_schema_to_gbnf,
        ("yaml", "lark"): yaml_schema_to_lark,
    }
    worst = 0.0
    compiled: list[tuple[str, str, float]] = []
    compiler = None
    if args.xgrammar:
        compiler, n_vocab = xgrammar_compiler()
    print(f"{'schema':9} {'format':6} {'syntax':6} {'median_ms':>9} {'min_ms':>7} {'lines':>6} {'kB':>6}")
    for name, schema in schemas(args.data, args.domain).items():
        for (fmt, syntax), gen in generators.items():
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                text = gen(schema)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            worst = max(worst, med)
            print(
                f"{name:9} {fmt:6} {syntax:6} {med * 1e3:9.1f} {min(times) * 1e3:7.1f} "
                f"{text.count(chr(10)):6} {len(text.encode()) / 1024:6.1f}"
            )
            if compiler is not None and syntax == "gbnf":
                ctimes = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    compiler.compile_grammar(text)  # the string, as vLLM passes it
                    ctimes.append(time.perf_counter() - t0)
                compiled.append((name, fmt, statistics.median(ctimes)))
    if compiled:
        print(
            f"\nxgrammar compile_grammar over the embedded Gemma vocabulary ({n_vocab} tokens), "
            f"median of {args.repeat}, 1 thread:"
        )
        print(f"{'schema':9} {'format':6} {'median_ms':>9}")
        for name, fmt, med in compiled:
            print(f"{name:9} {fmt:6} {med * 1e3:9.1f}")
    verdict = "OK" if worst < TARGET_S else "SLOW"
    print(f"{args.domain}: worst median {worst * 1e3:.1f} ms (target < {TARGET_S * 1e3:.0f} ms) {verdict}")
    return 0 if worst < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
