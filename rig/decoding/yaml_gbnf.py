"""JSON schema -> grammar for block-style YAML whose ``yaml.safe_load`` value validates against the schema.

Layout (indentation is the only context-sensitive part of YAML; with a finite schema every nesting level's
indent is a literal, so a context-free grammar suffices):

* 2 spaces per nesting level; every line ends with ``\\n``; no comments, tags, anchors or ``---``.
* mappings: ``key: scalar``; a nested collection starts on the next line, one level deeper; keys are plain
  identifiers (double-quoted when a plain key would not load as that string, e.g. ``on`` or ``a b``).
* sequences: ``- item``; a mapping inside a sequence starts on the dash line (``- k1: v``, then ``  k2: v``);
  a sequence inside a sequence starts on the next line (``-`` then ``  - x``).
* empty collections are written ``[]`` / ``{}``.
* strings are always double-quoted with JSON escapes (no YAML-1.1 ``yes``/``on``/``1e5`` traps); numbers,
  ``true``/``false`` and ``null`` are plain scalars in the forms PyYAML resolves to int/float/bool/None.
* schema-free values (``{}``, objects without properties) may be block or flow style (``{"k": [1, 2]}``) and
  nest at most ``any_depth`` levels.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from rig.decoding import prims
from rig.decoding.ir import Expr, Grammar, Lit, Ref, alt, ordered_entries, rep, seq
from rig.decoding.schema import AnyValue, Arr, Enum, Normalizer, Obj, Prim, SchemaError, Union_, key

Lead = Literal["root", "key", "dash"]  # what precedes the value: start of document, ``key:`` or ``-``
MAX_LEVEL = 32  # deeper means a recursive schema, which has no finite indentation


def yaml_schema_to_gbnf(schema: dict[str, Any] | bool, *, strict: bool = True, any_depth: int = prims.ANY_DEPTH) -> str:
    """GBNF accepting block YAML (layout in the module doc) whose loaded value validates against ``schema``.

    ``strict``: refuse keywords the grammar cannot enforce (else ignore them). ``any_depth``: how deep
    schema-free values may nest (indentation is literal, so YAML always needs a bound).
    """
    g, root = build_yaml_grammar(schema, strict=strict, any_depth=any_depth)
    return g.emit_gbnf(root)


def build_yaml_grammar(
    schema: dict[str, Any] | bool, *, strict: bool = True, any_depth: int = prims.ANY_DEPTH
) -> tuple[Grammar, Expr]:
    b = _YamlBuilder(Normalizer(schema, strict=strict), any_depth)
    return b.g, b.block(schema, 0, "root", "$", "doc")


def yaml_quote(s: str) -> str:
    """Double-quoted YAML scalar that PyYAML loads back as ``s`` (the form yaml_string() accepts)."""
    out = []
    for c in s:
        o = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif o < 0x20 or 0x7F <= o <= 0x9F or c in "\u2028\u2029\ufeff\ufffe\uffff":
            out.append(f"\\u{o:04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def yaml_scalar(v: Any) -> str:
    """A constant in the form the YAML grammar uses (flow style for collections)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise SchemaError(f"{v!r} is not a JSON number")
        r = repr(v)
        mant, _, exp = r.partition("e")
        if "." not in mant:
            mant += ".0"
        return mant + (("e" + (exp if exp[0] in "+-" else "+" + exp)) if exp else "")
    if isinstance(v, str):
        return yaml_quote(v)
    if isinstance(v, list):
        return "[" + ", ".join(yaml_scalar(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{yaml_quote(str(k))}: {yaml_scalar(x)}" for k, x in v.items()) + "}"
    raise SchemaError(f"{v!r} is not a JSON value")


def yaml_key_text(name: str) -> str:
    """How a declared key is written: plain when PyYAML reads it back as the same string, else quoted."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name not in prims.YAML_TRAP_WORDS:
        return name
    return yaml_quote(name)


def yaml_dump(value: Any) -> str:
    """Write ``value`` in the grammar's layout (e.g. for few-shot examples in prompts).

    Everything is written in block style (the grammar also accepts flow style inside schema-free values).
    """
    if isinstance(value, (dict, list)) and value:
        return _dump_block(value, 0, "root")
    return yaml_scalar(value) + "\n"


def _dump_block(v: Any, level: int, lead: Lead) -> str:
    if not isinstance(v, (dict, list)) or not v:
        return ("" if lead == "root" else " ") + yaml_scalar(v) + "\n"
    if isinstance(v, list):
        items = "".join(_indent(level) + "-" + _dump_block(x, level + 1, "dash") for x in v)
        return items if lead == "root" else "\n" + items
    lines = []
    for i, (k, x) in enumerate(v.items()):
        pre = "" if i == 0 and lead in ("dash", "root") else _indent(level)
        lines.append(pre + yaml_key_text(str(k)) + ":" + _dump_block(x, level + 1, "key"))
    return {"root": "", "dash": " ", "key": "\n"}[lead] + "".join(lines)


def _indent(level: int) -> str:
    return "  " * level


class _YamlBuilder:
    def __init__(self, norm: Normalizer, any_depth: int) -> None:
        self.norm = norm
        self.any_depth = any_depth
        self.g = Grammar()

    def block(self, s: Any, level: int, lead: Lead, path: str, hint: str) -> Ref:
        """A value after ``lead``; ``level`` is the nesting level of its children. Ends with a newline."""
        if level > MAX_LEVEL:
            raise SchemaError(f"{path}: YAML nesting deeper than {MAX_LEVEL} levels (recursive schema?)")
        return self.g.define(("yaml", key(s), level, lead), hint, lambda: self._block(s, level, lead, path, hint))

    def _block(self, s: Any, level: int, lead: Lead, path: str, hint: str) -> Expr:
        sh = self.norm.shape(s, path)
        g = self.g
        if isinstance(sh, Union_):
            return alt(*(self.block(o, level, lead, path, f"{hint}-alt") for o in sh.options))
        if isinstance(sh, AnyValue):
            return self._any(level, lead, self.any_depth)
        if isinstance(sh, Prim):
            scalar = {
                "string": lambda: (
                    prims.yaml_string(g, sh.min_len, sh.max_len)
                    if sh.pattern is None
                    else prims.pattern_string(g, sh.pattern)
                ),
                "number": lambda: prims.yaml_number(g),
                "integer": lambda: prims.json_integer(g),
                "boolean": lambda: alt(Lit("true"), Lit("false")),
                "null": lambda: Lit("null"),
            }[sh.type]()
            return self._inline(lead, scalar)
        if isinstance(sh, Enum):
            return self._inline(lead, alt(*(Lit(yaml_scalar(v)) for v in sh.values)))
        if isinstance(sh, Arr):
            options = [self._inline(lead, seq(Lit("["), Lit("]")))] if sh.min == 0 else []
            if sh.max != 0:
                item = seq(
                    Lit(_indent(level) + "-"), self.block(sh.items, level + 1, "dash", f"{path}[]", f"{hint}-item")
                )
                options.append(self._nested(lead, rep(item, max(sh.min, 1), sh.max)))
            return alt(*options)
        assert isinstance(sh, Obj)
        if not sh.props:
            return self._free_map(sh.extra, level, lead, path, hint, max_entries=sh.max_entries)
        options = [] if any(p.required for p in sh.props) else [self._inline(lead, seq(Lit("{"), Lit("}")))]
        options.append(self._nested(lead, self._entries(sh, level, lead, path, hint), compact=True))
        return alt(*options)

    @staticmethod
    def _inline(lead: Lead, scalar: Expr) -> Expr:
        """A value written on the current line."""
        return seq(Lit(" "), scalar, Lit("\n")) if lead != "root" else seq(scalar, Lit("\n"))

    @staticmethod
    def _nested(lead: Lead, lines: Expr, compact: bool = False) -> Expr:
        """A block collection: on the next lines, except a mapping right after a dash (``- k: v``)."""
        if lead == "root":
            return lines
        if lead == "dash" and compact:
            return seq(Lit(" "), lines)
        return seq(Lit("\n"), lines)

    def _entries(self, o: Obj, level: int, lead: Lead, path: str, hint: str) -> Expr:
        # After a dash the first key sits on the dash line, so it carries no indentation.
        first_pre = "" if lead in ("dash", "root") else _indent(level)
        pre = _indent(level)

        def entry(i: int, prefix: str) -> Expr:
            p = o.props[i]
            return seq(
                Lit(prefix + yaml_key_text(p.name) + ":"),
                self.block(p.schema, level + 1, "key", f"{path}.{p.name}", p.name),
            )

        okey = (key([[p.name, p.schema, p.required] for p in o.props]), level)  # tails use `pre` only
        return ordered_entries(
            self.g,
            ("yaml-obj", okey),
            hint,
            [p.required for p in o.props],
            lambda i: entry(i, first_pre),
            lambda i: entry(i, pre),
        )

    def _free_map(
        self,
        extra: Any,
        level: int,
        lead: Lead,
        path: str,
        hint: str,
        depth: int | None = None,
        max_entries: int | None = None,
    ) -> Expr:
        """A mapping with arbitrary keys, at most ``max_entries`` of them; values follow ``extra`` (True: any)."""
        empty = self._inline(lead, seq(Lit("{"), Lit("}")))
        if extra is False or max_entries == 0:
            return empty
        if (extra is True or extra == {}) and max_entries is None:  # schema-free values may also be flow style
            empty = self._inline(lead, prims.yaml_flow_map(self.g, self.any_depth if depth is None else depth))
        pre = _indent(level)
        first_pre = "" if lead in ("dash", "root") else pre
        k = prims.yaml_key(self.g)

        def value() -> Expr:
            if extra is True or extra == {}:
                return self._any(level + 1, "key", max((self.any_depth if depth is None else depth) - 1, 0))
            return self.block(extra, level + 1, "key", f"{path}.*", f"{hint}-v")

        v = value()
        more = rep(seq(Lit(pre), k, Lit(":"), v), 0, None if max_entries is None else max_entries - 1)
        lines = seq(Lit(first_pre), k, Lit(":"), v, more)
        return alt(empty, self._nested(lead, lines, compact=True))

    def _any(self, level: int, lead: Lead, depth: int) -> Ref:
        """Any value: scalar or flow collection on this line, or (depth permitting) a block collection."""

        def build() -> Expr:
            options = [self._inline(lead, prims.yaml_flow(self.g, depth))]
            if depth > 0:
                options.append(self._free_map(True, level, lead, "$", "any", depth))
                item = seq(Lit(_indent(level) + "-"), self._any(level + 1, "dash", depth - 1))
                options.append(self._nested(lead, rep(item, 1, None)))
            return alt(*options)

        return self.g.define(("yaml-any", level, lead, depth), f"any-l{level}", build)
