"""A tiny grammar IR shared by the GBNF (llama.cpp, xgrammar) and Lark (llguidance, outlines) emitters.

Builders describe a grammar once with ``Lit``/``Cls``/``Ref``/``Seq``/``Alt``/``Rep`` and a named-rule table;
``to_gbnf`` and ``to_lark`` only differ in surface syntax. Character-class bodies use the syntax both
formats share (``\\xNN`` / ``\\uNNNN`` escapes inside ``[...]``), produced by ``cls_escape``.

Lexer note: llguidance lexes greedily without backtracking, so a grammar where a short literal followed by
another token competes with a longer literal at the same position can reject valid text. The Lark emitter
therefore turns every regular (non-recursive) rule into a terminal, as llguidance's own GBNF importer does,
so alternatives inside it are decided by one DFA instead of by the greedy lexer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Cls:
    body: str  # bracket body, e.g. '^"\\\\\\x00-\\x1f'


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Alt:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Rep:
    item: Expr
    min: int
    max: int | None  # None = unbounded


Expr = Lit | Cls | Ref | Seq | Alt | Rep
EMPTY = Seq(())


def seq(*xs: Expr) -> Expr:
    out: list[Expr] = []
    for x in xs:
        if isinstance(x, Seq):
            out.extend(x.items)
        elif not (isinstance(x, Lit) and x.text == ""):
            out.append(x)
    return out[0] if len(out) == 1 else Seq(tuple(out))


def alt(*xs: Expr) -> Expr:
    out: list[Expr] = []
    for x in xs:
        for y in x.items if isinstance(x, Alt) else (x,):
            if y not in out:
                out.append(y)
    if not out:
        raise ValueError("empty alternation")
    if EMPTY in out and len(out) > 1:  # written as x? (Lark has no empty literal)
        return opt(alt(*(y for y in out if y != EMPTY)))
    return out[0] if len(out) == 1 else Alt(tuple(out))


def opt(x: Expr) -> Expr:
    return Rep(x, 0, 1)


def rep(x: Expr, lo: int, hi: int | None) -> Expr:
    if hi is not None and hi < lo:
        raise ValueError(f"repetition {lo}..{hi} is empty")
    if hi == 0:
        return EMPTY
    if lo == hi == 1:
        return x
    return Rep(x, lo, hi)


def ordered_entries(
    g: Grammar,
    key: Hashable,
    hint: str,
    required: list[bool],
    first: Callable[[int], Expr],
    rest: Callable[[int], Expr],
) -> Expr:
    """One or more object entries in declared order, every required one present.

    ``first(i)`` renders entry i when it is the first one written, ``rest(i)`` otherwise (separator or
    indentation). Shared tails are rules so k possible first entries do not copy k tails, and no rule can
    match "" (a nullable rule could not be a Lark terminal, see the module doc).
    """
    n = len(required)
    first_required = next((i for i in range(n) if required[i]), None)
    last_required = max((i for i in range(n) if required[i]), default=-1)
    starts = range(first_required + 1) if first_required is not None else range(n)

    def some(k: int) -> Ref:  # one or more of the (all optional) entries k..n-1
        return g.define(
            (key, "some", k),
            f"{hint}-some",
            lambda: alt(
                seq(rest(k), opt(some(k + 1))) if k + 1 < n else rest(k), *((some(k + 1),) if k + 1 < n else ())
            ),
        )

    def tail(k: int) -> Expr:  # what follows a written entry k-1
        if k >= n:
            return EMPTY
        if k > last_required:
            return opt(some(k))
        if len(starts) == 1:  # a single start: the tail is written once, inline
            return seq(rest(k) if required[k] else opt(rest(k)), tail(k + 1))
        return g.define(
            (key, "tail", k), f"{hint}-tail", lambda: seq(rest(k) if required[k] else opt(rest(k)), tail(k + 1))
        )

    return alt(*(seq(first(i), tail(i + 1)) for i in starts))


def cls_escape(chars: str) -> str:
    """Escape characters for use inside a ``[...]`` body readable by both GBNF and regex engines."""
    out = []
    for c in chars:
        if (c.isalnum() and c.isascii()) or c in " _.,:;!#%&'<=>@`~{}()|?*+$":
            out.append(c)
        elif ord(c) < 0x100:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return "".join(out)


def nullable(e: Expr, rules: dict[str, Expr], cache: dict[str, bool] | None = None) -> bool:
    """Whether ``e`` can match the empty string (a rule on the current path counts as non-empty)."""
    cache = {} if cache is None else cache
    if isinstance(e, Lit):
        return e.text == ""
    if isinstance(e, Cls):
        return False
    if isinstance(e, Ref):
        if e.name not in cache:
            cache[e.name] = False
            cache[e.name] = nullable(rules[e.name], rules, cache)
        return cache[e.name]
    if isinstance(e, Seq):
        return all(nullable(x, rules, cache) for x in e.items)
    if isinstance(e, Alt):
        return any(nullable(x, rules, cache) for x in e.items)
    return e.min == 0 or nullable(e.item, rules, cache)


class Grammar:
    """Named rules plus a memo so identical sub-schemas share one rule (and recursion terminates)."""

    def __init__(self) -> None:
        self.rules: dict[str, Expr] = {}
        self._memo: dict[Hashable, Ref] = {}
        self._names: set[str] = {"root", "start"}  # the two formats' entry rules

    def _name(self, hint: str) -> str:
        base = re.sub(r"[^a-z0-9]+", "-", re.sub(r"([a-z])([A-Z])", r"\1-\2", hint).lower()).strip("-")
        base = base[:40].rstrip("-") or "r"
        if not base[0].isalpha():
            base = "r-" + base
        name, i = base, 1
        while name in self._names:
            i += 1
            name = f"{base}-{i}"
        self._names.add(name)
        return name

    def define(self, key: Hashable, hint: str, build: Callable[[], Expr]) -> Ref:
        """Rule for ``key``, built once; the name is reserved first so recursive schemas terminate."""
        ref = self._memo.get(key)
        if ref is None:
            ref = self._memo[key] = Ref(self._name(hint))
            self.rules[ref.name] = build()
        return ref

    def emit_gbnf(self, root: Expr) -> str:
        lines = [f"root ::= {_gbnf(root, top=True)}"]
        lines += [f"{n} ::= {_gbnf(e, top=True)}" for n, e in self.rules.items()]
        return "\n".join(lines) + "\n"

    def emit_lark(self, root: Expr) -> str:
        terminal = self._regular_rules()
        names = {n: (n.replace("-", "_").upper() if n in terminal else n.replace("-", "_")) for n in self.rules}
        lines = [f"start: {_lark(root, names, top=True)}"]
        lines += [f"{names[n]}: {_lark(e, names, top=True)}" for n, e in self.rules.items()]
        return "\n".join(lines) + "\n"

    def _regular_rules(self) -> set[str]:
        """Rules built only from literals, classes and other such rules (no recursion) that never match ""."""
        refs = {n: _refs(e) for n, e in self.rules.items()}
        users: dict[str, list[str]] = {}
        for n, rs in refs.items():
            for r in rs:
                users.setdefault(r, []).append(n)
        pending = {n: len(rs) for n, rs in refs.items()}
        todo = [n for n, k in pending.items() if k == 0]
        cache: dict[str, bool] = {}
        out: set[str] = set()
        while todo:  # Kahn's order: a rule becomes a terminal once everything it references is one
            n = todo.pop()
            if nullable(self.rules[n], self.rules, cache):
                continue
            out.add(n)
            for u in users.get(n, ()):
                pending[u] -= 1
                if pending[u] == 0:
                    todo.append(u)
        return out


def _refs(e: Expr) -> set[str]:
    if isinstance(e, Ref):
        return {e.name}
    if isinstance(e, (Seq, Alt)):
        return set().union(*(_refs(x) for x in e.items)) if e.items else set()
    if isinstance(e, Rep):
        return _refs(e.item)
    return set()


def _suffix(r: Rep) -> str:
    lo, hi = r.min, r.max
    if (lo, hi) == (0, 1):
        return "?"
    if (lo, hi) == (0, None):
        return "*"
    if (lo, hi) == (1, None):
        return "+"
    if hi is None:
        return f"{{{lo},}}"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def gbnf_literal(s: str) -> str:
    esc = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return (
        '"'
        + _hex_safe("".join(esc.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else c) for c in s))
        + '"'
    )


_HEX = frozenset("0123456789abcdefABCDEF")
_ESC_WIDTH = {"x": 2, "u": 4, "U": 8}


def _hex_safe(body: str) -> str:
    """Escape a hex digit that follows a ``\\xNN`` escape (as ``\\xNN`` too).

    llama.cpp reads exactly two digits after ``\\x``; xgrammar (vLLM's default backend) reads all that follow,
    so ``[\\x2fb]`` is "/" or "b" to one and U+02FB to the other. (``\\u0009`` is no way out: llguidance's GBNF
    importer misreads it.)
    """
    out, i, after_x = [], 0, False
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            width = _ESC_WIDTH.get(body[i + 1], 0)
            out.append(body[i : i + 2 + width])
            after_x = body[i + 1] == "x"
            i += 2 + width
            continue
        if after_x and c in _HEX:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
            after_x = False
        i += 1
    return "".join(out)


def lark_literal(s: str) -> str:
    esc = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return (
        '"'
        + "".join(
            esc.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029" else c)
            for c in s
        )
        + '"'
    )


def _gbnf(e: Expr, top: bool = False) -> str:
    if isinstance(e, Lit):
        return gbnf_literal(e.text)
    if isinstance(e, Cls):
        return f"[{_hex_safe(e.body)}]"
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Seq):
        s = " ".join(_gbnf(x) for x in e.items) if e.items else '""'
        return s if top or len(e.items) == 1 else f"({s})"
    if isinstance(e, Alt):
        s = " | ".join(_gbnf(x, top=isinstance(x, Seq)) for x in e.items)
        return s if top else f"({s})"
    inner = _gbnf(e.item)
    if isinstance(e.item, Rep):
        inner = f"({inner})"
    return inner + _suffix(e)


def _lark(e: Expr, names: dict[str, str], top: bool = False) -> str:
    if isinstance(e, Lit):
        return lark_literal(e.text)
    if isinstance(e, Cls):
        return f"/[{e.body}]/"  # cls_escape never leaves a raw "/" in a body
    if isinstance(e, Ref):
        return names[e.name]
    if isinstance(e, Seq):
        s = " ".join(_lark(x, names) for x in e.items) if e.items else '""'
        return s if top or len(e.items) == 1 else f"({s})"
    if isinstance(e, Alt):
        s = " | ".join(_lark(x, names, top=isinstance(x, Seq)) for x in e.items)
        return s if top else f"({s})"
    inner = _lark(e.item, names)
    if isinstance(e.item, Rep):
        inner = f"({inner})"
    return inner + _suffix(e)
