"""Lexical building blocks shared by the JSON and YAML grammars (defined once per grammar, on first use)."""

from __future__ import annotations

from rig.decoding.ir import Cls, Expr, Grammar, Lit, Ref, alt, cls_escape, opt, rep, seq

# Nesting allowed inside schema-free values ({}, objects without properties). Bounded nesting keeps every
# non-recursive schema's grammar regular, which llguidance's greedy lexer needs (see json_any).
ANY_DEPTH = 5
# Pretty-printed JSON needs a newline plus indentation; bounding it keeps a model from looping on blanks.
MAX_INDENT = 24
# Digits per run in a number (integer part, fraction, exponent): beyond a double's 17 significant digits more
# digits carry no value, and an unbounded run lets a model loop on "000..." until max_tokens.
MAX_DIGITS = 20
MAX_EXP_DIGITS = 3
# Identifier-like plain scalars that yaml.safe_load (PyYAML, YAML 1.1 resolvers) does not read as strings.
# PyYAML keeps y/n as strings, and x/y are common keys in geospatial answers, so they stay allowed.
YAML_TRAP_WORDS = frozenset(
    f(w) for w in ("yes", "no", "true", "false", "on", "off", "null") for f in (str.lower, str.capitalize, str.upper)
)

HEX = Cls("0-9a-fA-F")
DIGIT = Cls("0-9")


def ws(g: Grammar) -> Ref:
    """One space, or one newline followed by at most MAX_INDENT spaces/tabs (never empty: use opt())."""
    return g.define("ws", "ws", lambda: alt(Lit(" "), seq(Lit("\n"), rep(Cls(cls_escape(" \t")), 0, MAX_INDENT))))


def json_string(g: Grammar, lo: int = 0, hi: int | None = None) -> Ref:
    """A JSON string; with length bounds (in code points) \\u escapes of UTF-16 surrogates are left out,
    because a pair is two grammar items but one character.

    A bounded string repeats a named character rule: llama.cpp expands ``X{m,n}`` by copying X and refuses the
    grammar when (rules inside X) x n exceeds 2000, so a nested group repeated 200 times fails where a rule
    reference does not.
    """
    bounded = (lo, hi) != (0, None)

    def build() -> Expr:
        u = _hex4_not_surrogate() if bounded else rep(HEX, 4, 4)
        char = alt(
            Cls("^" + cls_escape('"\\') + "\\x00-\\x1f"),
            seq(Lit("\\"), alt(Cls(cls_escape('"\\/bfnrt')), seq(Lit("u"), u))),
        )
        if bounded:  # one rule repeated, not a nested group (see the docstring)
            char = g.define(("json-char-bounded",), "string-char", lambda: char)
        return seq(Lit('"'), rep(char, lo, hi), Lit('"'))

    name = "string" + (f"-{lo}-{hi if hi is not None else 'n'}" if bounded else "")
    return g.define(("json-string", lo, hi), name, build)


def pattern_string(g: Grammar, pattern: str) -> Ref:
    """A double-quoted string whose content is the language of a plain anchored pattern (``schema.plain_pattern``):
    no character of it needs an escape, so the same text is a JSON string and a YAML double-quoted scalar."""
    from rig.decoding.regex import regex_to_ir

    return g.define(("pattern-string", pattern), "pstring", lambda: seq(Lit('"'), regex_to_ir(pattern), Lit('"')))


def _hex4_not_surrogate() -> Expr:
    return alt(seq(Cls("0-9a-cA-Ce-fE-F"), rep(HEX, 3, 3)), seq(Cls("dD"), Cls("0-7"), rep(HEX, 2, 2)))


def _uint() -> Expr:
    return alt(Lit("0"), seq(Cls("1-9"), rep(DIGIT, 0, MAX_DIGITS - 1)))


def _frac() -> Expr:
    return seq(Lit("."), rep(DIGIT, 1, MAX_DIGITS))


def _exp(sign_required: bool) -> Expr:
    sign = Cls(cls_escape("+-"))
    return seq(Cls("eE"), sign if sign_required else opt(sign), rep(DIGIT, 1, MAX_EXP_DIGITS))


def json_integer(g: Grammar) -> Ref:
    return g.define("json-integer", "integer", lambda: seq(opt(Lit("-")), _uint()))


def json_number(g: Grammar) -> Ref:
    return g.define(
        "json-number", "number", lambda: seq(opt(Lit("-")), _uint(), opt(_frac()), opt(_exp(sign_required=False)))
    )


def json_any(g: Grammar, depth: int | None = None) -> Ref:
    """Any JSON value with collections nested at most ``depth`` deep (None: unbounded, i.e. recursive).

    A bounded value is a regular language, so llguidance can lex it as one token; a recursive rule next to a
    regular alternative that starts the same way (``{``) is lost to llguidance's greedy lexer.
    """
    sfx = "" if depth is None else f"-{depth}"

    def build() -> Expr:
        w = opt(ws(g))
        scalars = (json_string(g), json_number(g), Lit("true"), Lit("false"), Lit("null"))
        if depth is not None and depth <= 0:
            return alt(seq(Lit("{"), w, Lit("}")), seq(Lit("["), w, Lit("]")), *scalars)
        val = json_any(g, None if depth is None else depth - 1)  # for None: already reserved, so recursion ends
        member = seq(json_string(g), w, Lit(":"), w, val, w)
        obj = seq(Lit("{"), w, opt(seq(member, rep(seq(Lit(","), w, member), 0, None))), Lit("}"))
        arr = seq(Lit("["), w, opt(seq(val, w, rep(seq(Lit(","), w, val, w), 0, None))), Lit("]"))
        return alt(
            g.define(("json-object", depth), "object" + sfx, lambda: obj),
            g.define(("json-array", depth), "array" + sfx, lambda: arr),
            *scalars,
        )

    return g.define(("json-value", depth), "json-value" + sfx, build)


# ---- YAML (PyYAML is YAML 1.1: its resolvers decide which plain scalars stay strings) ----


def yaml_string(g: Grammar, lo: int = 0, hi: int | None = None) -> Ref:
    """JSON-style double-quoted string that rig's YAML loader reads back unchanged (length bounds in code points).

    Raw ASCII controls and DEL are excluded; raw C1 controls, U+2028/9 and BOM/non-characters are not (PyYAML
    rejects or folds them, so rig's loader escapes them inside double quotes first: `rig.decoding.safe.load_yaml`).
    Excluding them here made the class one llguidance cannot mask fast: 1.1 ms per token inside a bounded string
    against 0.04 ms (benchmarks/results/constrained_cost.md). \\u escapes of UTF-16 surrogates are excluded (PyYAML
    keeps them unpaired).
    """

    def build() -> Expr:
        raw = Cls("^" + cls_escape('"\\') + "\\x00-\\x1f\\x7f")
        char = alt(raw, seq(Lit("\\"), alt(Cls(cls_escape('"\\/bfnrt')), seq(Lit("u"), _hex4_not_surrogate()))))
        if (lo, hi) != (0, None):  # see json_string
            char = g.define(("yaml-char-bounded",), "ystring-char", lambda: char)
        return seq(Lit('"'), rep(char, lo, hi), Lit('"'))

    name = "ystring" + (f"-{lo}-{hi if hi is not None else 'n'}" if (lo, hi) != (0, None) else "")
    return g.define(("yaml-string", lo, hi), name, build)


def yaml_number(g: Grammar) -> Ref:
    """PyYAML floats need a '.' and a signed exponent ("1e5" and "1.0e5" load as strings)."""
    return g.define(
        "yaml-number", "ynumber", lambda: seq(opt(Lit("-")), _uint(), opt(seq(_frac(), opt(_exp(sign_required=True)))))
    )


def yaml_scalar_any(g: Grammar) -> Ref:
    return g.define(
        "yaml-scalar", "yscalar", lambda: alt(yaml_string(g), yaml_number(g), Lit("true"), Lit("false"), Lit("null"))
    )


def yaml_flow(g: Grammar, depth: int | None) -> Ref:
    """Any value in YAML flow style (JSON layout, YAML-safe scalars), collections nested ``depth`` deep."""
    sfx = "" if depth is None else f"-{depth}"

    def build() -> Expr:
        if depth is not None and depth <= 0:
            return alt(yaml_scalar_any(g), Lit("{}"), Lit("[]"))
        return alt(yaml_scalar_any(g), yaml_flow_map(g, depth), yaml_flow_seq(g, depth))

    return g.define(("yaml-flow", depth), "yflow" + sfx, build)


def yaml_flow_map(g: Grammar, depth: int | None) -> Ref:
    sfx = "" if depth is None else f"-{depth}"

    def build() -> Expr:
        if depth is not None and depth <= 0:
            return Lit("{}")
        member = seq(yaml_string(g), Lit(": "), yaml_flow(g, None if depth is None else depth - 1))
        return seq(Lit("{"), opt(seq(member, rep(seq(Lit(", "), member), 0, None))), Lit("}"))

    return g.define(("yaml-flow-map", depth), "yflow-map" + sfx, build)


def yaml_flow_seq(g: Grammar, depth: int | None) -> Ref:
    sfx = "" if depth is None else f"-{depth}"

    def build() -> Expr:
        if depth is not None and depth <= 0:
            return Lit("[]")
        val = yaml_flow(g, None if depth is None else depth - 1)
        return seq(Lit("["), opt(seq(val, rep(seq(Lit(", "), val), 0, None))), Lit("]"))

    return g.define(("yaml-flow-seq", depth), "yflow-seq" + sfx, build)


def yaml_plain_key(g: Grammar) -> Ref:
    """An identifier ``[A-Za-z_][A-Za-z0-9_]*`` that is not a YAML boolean/null word (so it loads as a str)."""
    return g.define("yaml-plain-key", "ykey", lambda: _not_words(YAML_TRAP_WORDS))


def yaml_key(g: Grammar) -> Ref:
    return g.define("yaml-key", "ykey-any", lambda: alt(yaml_plain_key(g), yaml_string(g)))


_FIRST = "ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
_REST = _FIRST + "0123456789"


def _not_words(words: frozenset[str]) -> Expr:
    """Identifiers minus a finite word set, as a regular expression over a trie of the words."""

    def node(prefix: str) -> Expr:
        allowed = _FIRST if not prefix else _REST
        kids = sorted({w[len(prefix)] for w in words if len(w) > len(prefix) and w.startswith(prefix)})
        others = "".join(c for c in allowed if c not in kids)
        tail = rep(Cls(_class_of(_REST)), 0, None)
        options = [seq(Cls(_class_of(others)), tail)] if others else []
        options += [seq(Lit(c), node(prefix + c)) for c in kids]
        body = alt(*options)
        return opt(body) if prefix and prefix not in words else body

    return node("")


def _class_of(chars: str) -> str:
    """Compact [...] body for a set of ASCII identifier characters (runs become ranges)."""
    codes = sorted(set(map(ord, chars)))
    out, i = [], 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        a, b = chr(codes[i]), chr(codes[j])
        out.append(cls_escape(a) if i == j else cls_escape(a) + ("-" if j > i + 1 else "") + cls_escape(b))
        i = j + 1
    return "".join(out)


__all__ = [
    "ANY_DEPTH",
    "MAX_DIGITS",
    "MAX_INDENT",
    "YAML_TRAP_WORDS",
    "json_any",
    "json_integer",
    "json_number",
    "json_string",
    "ws",
    "yaml_flow",
    "yaml_flow_map",
    "yaml_flow_seq",
    "yaml_key",
    "yaml_number",
    "yaml_plain_key",
    "yaml_scalar_any",
    "yaml_string",
]
