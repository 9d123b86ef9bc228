"""JSON schema -> grammar for JSON output (GBNF for llama.cpp/xgrammar; Lark via rig.decoding.lark).

Objects are closed (only declared keys, declared order, optional keys may be skipped) unless the schema
declares no properties at all, in which case any keys are allowed. Whitespace between tokens is optional
and bounded (one space, or one newline plus indentation) so a model cannot loop on blanks.
"""

from __future__ import annotations

import json
from typing import Any

from rig.decoding import prims
from rig.decoding.ir import Expr, Grammar, Lit, Ref, alt, opt, ordered_entries, rep, seq
from rig.decoding.schema import AnyValue, Arr, Enum, Normalizer, Obj, Prim, SchemaError, Union_, key


def json_schema_to_gbnf(
    schema: dict[str, Any] | bool, *, strict: bool = True, any_depth: int | None = prims.ANY_DEPTH
) -> str:
    """GBNF accepting JSON text whose value validates against ``schema`` (see module doc for the subset).

    ``strict``: refuse keywords the grammar cannot enforce (else ignore them). ``any_depth``: how deep
    schema-free values may nest (None: unbounded).
    """
    g, root = build_json_grammar(schema, strict=strict, any_depth=any_depth)
    return g.emit_gbnf(root)


def build_json_grammar(
    schema: dict[str, Any] | bool, *, strict: bool = True, any_depth: int | None = prims.ANY_DEPTH
) -> tuple[Grammar, Expr]:
    b = _JsonBuilder(Normalizer(schema, strict=strict), any_depth)
    return b.g, b.value(schema, "$", "doc")


class _JsonBuilder:
    def __init__(self, norm: Normalizer, any_depth: int | None) -> None:
        self.norm = norm
        self.any_depth = any_depth
        self.g = Grammar()

    @property
    def w(self) -> Expr:
        return opt(prims.ws(self.g))

    def value(self, s: Any, path: str, hint: str) -> Ref:
        sh = self.norm.shape(s, path)
        if isinstance(sh, AnyValue):  # shared primitives need no per-schema alias rule
            return prims.json_any(self.g, self.any_depth)
        if isinstance(sh, Prim) and sh.type == "string" and sh.pattern is not None:
            return prims.pattern_string(self.g, sh.pattern)
        if isinstance(sh, Prim) and sh.type == "string":
            return prims.json_string(self.g, sh.min_len, sh.max_len)
        if isinstance(sh, Prim) and sh.type in ("number", "integer"):
            return (prims.json_number if sh.type == "number" else prims.json_integer)(self.g)
        return self.g.define(("json", key(s)), hint, lambda: self._value(s, path, hint))

    def _value(self, s: Any, path: str, hint: str) -> Expr:
        sh = self.norm.shape(s, path)
        if isinstance(sh, Prim):  # boolean or null: strings and numbers are shared rules (see value())
            return alt(Lit("true"), Lit("false")) if sh.type == "boolean" else Lit("null")
        if isinstance(sh, Enum):
            try:
                return alt(*(Lit(json.dumps(v, ensure_ascii=False, allow_nan=False)) for v in sh.values))
            except ValueError as e:
                raise SchemaError(f"{path}: enum/const value is not JSON ({e})") from None
        if isinstance(sh, Union_):
            return alt(*(self.value(o, path, f"{hint}-alt") for o in sh.options))
        if isinstance(sh, Arr):
            return self._array(sh, path, hint)
        assert isinstance(sh, Obj)
        return self._object(sh, path, hint) if sh.props else self._free_object(sh, path, hint)

    def _array(self, a: Arr, path: str, hint: str) -> Expr:
        if a.max == 0:
            return seq(Lit("["), self.w, Lit("]"))
        item = seq(self.value(a.items, f"{path}[]", f"{hint}-item"), self.w)
        more = rep(seq(Lit(","), self.w, item), max(a.min - 1, 0), None if a.max is None else a.max - 1)
        body = seq(item, more)
        return seq(Lit("["), self.w, body if a.min > 0 else opt(body), Lit("]"))

    def _free_object(self, o: Obj, path: str, hint: str) -> Expr:
        if o.extra is False:
            return seq(Lit("{"), self.w, Lit("}"))

        def val() -> Expr:  # a schema-free object counts as one level of its values' nesting budget
            if self.norm.shape(o.extra) == AnyValue() and self.any_depth is not None:
                return prims.json_any(self.g, max(self.any_depth - 1, 0))
            return self.value(o.extra, f"{path}.*", f"{hint}-v")

        if o.max_entries == 0:
            return seq(Lit("{"), self.w, Lit("}"))
        member = self.g.define(
            ("json-member", key(o.extra)),
            f"{hint}-member",
            lambda: seq(prims.json_string(self.g), self.w, Lit(":"), self.w, val(), self.w),
        )
        more = rep(seq(Lit(","), self.w, member), 0, None if o.max_entries is None else o.max_entries - 1)
        return seq(Lit("{"), self.w, opt(seq(member, more)), Lit("}"))

    def _object(self, o: Obj, path: str, hint: str) -> Expr:
        okey = key([[p.name, p.schema, p.required] for p in o.props])

        def kv(i: int) -> Ref:
            p = o.props[i]
            return self.g.define(
                ("json-kv", okey, i),
                f"{hint}-{p.name}-kv",
                lambda: seq(
                    Lit(json.dumps(p.name, ensure_ascii=False)),
                    self.w,
                    Lit(":"),
                    self.w,
                    self.value(p.schema, f"{path}.{p.name}", p.name),
                    self.w,
                ),
            )

        body = ordered_entries(
            self.g, ("json-obj", okey), hint, [p.required for p in o.props], kv, lambda i: seq(Lit(","), self.w, kv(i))
        )
        if not any(p.required for p in o.props):
            body = opt(body)
        return seq(Lit("{"), self.w, body, Lit("}"))
