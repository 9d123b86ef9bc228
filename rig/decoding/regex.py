"""Translate simple regular expressions into the grammar IR (so regex constraints work on GBNF engines).

Supported: literals and escapes, ``.``, classes ``[...]`` (ranges, negation, ``\\d \\w \\s`` inside),
``\\d \\D \\w \\W \\s \\S``, groups ``(...)``, ``(?:...)``, ``(?P<n>...)``, alternation, quantifiers
``* + ? {m} {m,} {m,n}`` (lazy forms too: they do not change which strings fully match), and ``^``/``$``
at the ends (the grammar always matches the whole output). ``\\d``/``\\w`` are ASCII here (Python's are
Unicode), which narrows the language. Anything else (backreferences, lookaround, inline flags, ``\\b``,
possessive quantifiers) raises NotImplementedError naming the construct.
"""

from __future__ import annotations

from rig.decoding.ir import EMPTY, Cls, Expr, Lit, alt, cls_escape, rep, seq

_CLASS = {"d": "0-9", "w": "0-9A-Za-z_", "s": cls_escape(" \t\n\r\f\v")}
_SIMPLE_ESC = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "0": "\0"}


def regex_to_ir(pattern: str) -> Expr:
    p = _Parser(pattern)
    expr = p.alternation()
    if p.i != len(pattern):
        p.fail("unbalanced ')'")
    return expr


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def fail(self, what: str) -> None:
        raise NotImplementedError(
            f"regex {self.s!r} at offset {self.i}: {what} cannot be translated to a grammar "
            "(supported: literals, classes, groups, |, * + ? {m,n}, ^/$ at the ends)"
        )

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self) -> str:
        c = self.peek()
        self.i += 1
        return c

    def alternation(self) -> Expr:
        options = [self.concat()]
        while self.peek() == "|":
            self.i += 1
            options.append(self.concat())
        return options[0] if len(options) == 1 else alt(*options)

    def concat(self) -> Expr:
        items: list[Expr] = []
        while self.peek() and self.peek() not in "|)":
            if self.peek() == "^" and self.i == 0:
                self.i += 1
                continue
            if self.peek() == "$" and self.i == len(self.s) - 1:
                self.i += 1
                continue
            if self.peek() in "^$":
                self.fail(f"anchor {self.peek()!r} inside the pattern")
            items.append(self.quantified(self.atom()))
        return seq(*items) if items else EMPTY

    def quantified(self, x: Expr) -> Expr:
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{" and self._counted():
                lo, hi = self._bounds()
            else:
                return x
            if self.peek() == "?":  # lazy: same full-match language
                self.i += 1
            elif self.peek() == "+":
                self.fail("possessive quantifier")
            x = rep(x, lo, hi)

    def _counted(self) -> bool:
        j = self.s.find("}", self.i)
        body = self.s[self.i + 1 : j] if j > 0 else ""
        parts = body.split(",")
        return j > 0 and len(parts) <= 2 and parts[0].isdigit() and all(p.isdigit() or p == "" for p in parts[1:])

    def _bounds(self) -> tuple[int, int | None]:
        j = self.s.index("}", self.i)
        body, self.i = self.s[self.i + 1 : j], j + 1
        if "," not in body:
            return int(body), int(body)
        lo, hi = body.split(",")
        return int(lo), int(hi) if hi else None

    def atom(self) -> Expr:
        c = self.take()
        if c == "(":
            if self.peek() == "?":
                if self.s.startswith("?:", self.i):
                    self.i += 2
                elif self.s.startswith("?P<", self.i):
                    self.i = self.s.index(">", self.i) + 1
                else:
                    self.fail("group extension '(?" + self.s[self.i + 1 : self.i + 2] + "'")
            inner = self.alternation()
            if self.take() != ")":
                self.fail("missing ')'")
            return inner
        if c == "[":
            return self.char_class()
        if c == ".":
            return Cls("^" + cls_escape("\n"))
        if c == "\\":
            return self.escape(in_class=False)
        if c in "*+?":
            self.fail(f"nothing to repeat before {c!r}")
        return Lit(c)

    def escape(self, in_class: bool) -> Expr:
        c = self.take()
        if c in _CLASS:
            return Cls(_CLASS[c])
        if c in "DWS":
            if in_class:
                self.fail(f"negated class \\{c} inside [...]")
            return Cls("^" + _CLASS[c.lower()])
        if c in _SIMPLE_ESC:
            return Lit(_SIMPLE_ESC[c])
        if c in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[c]
            digits = self.s[self.i : self.i + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                self.fail(f"bad \\{c} escape")
            self.i += n
            return Lit(chr(int(digits, 16)))
        if c == "" or c.isalnum():
            self.fail(f"escape \\{c}")
        return Lit(c)

    def char_class(self) -> Expr:
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        parts: list[str] = []
        first = True
        while True:
            c = self.peek()
            if c == "":
                self.fail("missing ']'")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            lo = self._class_char()
            if isinstance(lo, Cls):
                parts.append(lo.body)
                continue
            if self.peek() == "-" and self.s[self.i + 1 : self.i + 2] not in ("]", ""):
                self.i += 1
                hi = self._class_char()
                if isinstance(hi, Cls) or ord(hi) < ord(lo):
                    self.fail("bad range in [...]")
                parts.append(cls_escape(lo) + "-" + cls_escape(hi))  # type: ignore[arg-type]
            else:
                parts.append(cls_escape(lo))
        return Cls(("^" if negate else "") + "".join(parts))

    def _class_char(self) -> str | Cls:
        c = self.take()
        if c == "[" and self.peek() == ":":
            self.fail("POSIX class [:...:]")
        if c != "\\":
            return c
        e = self.escape(in_class=True)
        if isinstance(e, Cls):
            return e
        assert isinstance(e, Lit)
        return e.text
