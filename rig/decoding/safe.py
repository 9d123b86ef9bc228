"""Bounded readers of model text: the one place JSON and YAML from a model are loaded.

A model can write anything up to ``max_tokens``; every reader here runs in time linear in the text, refuses input
over ``MAX_CHARS``, and returns either a plain JSON value (dict, list, str, finite number, bool, None) that the
result store can always encode, or a reason it is not one. Nothing here raises on model text.

Limits: nesting depth, total nodes as expanded (a YAML "billion laughs" shares one list many times over, so the
count follows aliases), YAML aliases, integer digits, lone surrogates in strings. YAML loads with the pure-Python
safe loader with no implicit dates (``2024-02-30`` stays a string) and no binary, set or ordered-map tags.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_CHARS = 200_000  # far above any reply a benchmark asks for (tens of thousands of tokens)
# The pure-Python YAML scanner reads text at about 1 us a character, but token-dense text costs about 10 us: a flow
# list of 31,000 numbers at this cap takes about 0.6 s of CPU, the slowest YAML reply measured.
MAX_YAML_CHARS = 64_000
MAX_DEPTH = 64
MAX_NODES = 20_000
MAX_ALIASES = 100
MAX_INT_DIGITS = 64

Result = tuple[Any, str | None]


class Refused(ValueError):
    """Text or a value over one of the limits above (a format error, never an engine error)."""


def too_long(text: str, limit: int = MAX_CHARS) -> str | None:
    return f"reply of {len(text)} characters is over the {limit} a reader accepts" if len(text) > limit else None


def _int(s: str) -> int:
    digits = len(s.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise Refused(f"integer with {digits} digits (at most {MAX_INT_DIGITS})")
    return int(s)


def _float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise Refused(f"number {s[:40]} is out of range")
    return v


def _constant(name: str) -> Any:
    raise Refused(f"{name} is not JSON")  # json.loads would otherwise accept NaN and Infinity


def check_value(value: Any, *, max_nodes: int = MAX_NODES, finite: bool = True) -> str | None:
    """None when ``value`` is a plain, finite, bounded JSON value; else why not. Iterative, so depth costs no stack;
    nodes are counted as expanded, so shared (aliased) containers count every time they appear. ``finite=False``
    lets NaN and infinities through, for a caller whose own validation names the field that holds one."""
    stack: list[tuple[Any, int, frozenset[int]]] = [(value, 0, frozenset())]
    nodes = 0
    while stack:
        v, depth, above = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return f"more than {max_nodes} values"
        if depth > MAX_DEPTH:
            return f"nested more than {MAX_DEPTH} deep"
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, int):
            if v.bit_length() > 213:  # about MAX_INT_DIGITS decimal digits
                return f"integer over {MAX_INT_DIGITS} digits"
        elif isinstance(v, float):
            if finite and not math.isfinite(v):
                return f"number {v} is not finite"
        elif isinstance(v, str):
            err = _text_error(v)
            if err:
                return err
        elif isinstance(v, (list, dict)):
            if id(v) in above:
                return "a value contains itself"
            inner = above | {id(v)}
            if isinstance(v, dict):
                for k in v:  # json.dumps writes scalar keys as strings
                    if isinstance(k, str):
                        err = _text_error(k)
                    elif (
                        k is None
                        or isinstance(k, (bool, int))
                        or (isinstance(k, float) and (not finite or math.isfinite(k)))
                    ):
                        err = None if not isinstance(k, int) or k.bit_length() < 213 else "integer key too long"
                    else:
                        err = f"a {type(k).__name__} key is not a JSON key"
                    if err:
                        return err
                items = list(v.values())
            else:
                items = v
            if nodes + len(items) > max_nodes:
                return f"more than {max_nodes} values"
            stack.extend((x, depth + 1, inner) for x in items)
        else:
            return f"a {type(v).__name__} is not a JSON value"
    return None


def _text_error(s: str) -> str | None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return "string with a lone surrogate (not UTF-8)"
    return None


def load_json(text: str, *, max_chars: int = MAX_CHARS, max_nodes: int = MAX_NODES, finite: bool = True) -> Result:
    """``(value, None)`` or ``(None, reason)``; JSON text only (no NaN/Infinity unless ``finite=False``), bounded as
    the module says. A file rig reads (``rig.inputs``) may be larger than a reply (``max_chars``, ``max_nodes``)."""
    err = too_long(text, max_chars) or _flow_depth_error(text, "JSON")
    if err:
        return None, err
    try:
        value = json.loads(
            text, parse_int=_int, parse_float=_float if finite else float, parse_constant=_constant if finite else None
        )
    except Refused as e:
        return None, f"invalid JSON: {e}"
    except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
        return None, f"invalid JSON: {str(e)[:200]}"
    err = check_value(value, max_nodes=max_nodes, finite=finite)
    return (None, f"invalid JSON: {err}") if err else (value, None)


_LOADER: Any = None


def _loader() -> Any:
    """A SafeLoader subclass built once, on first use (no work at import time)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml
    from yaml.composer import ComposerError
    from yaml.constructor import ConstructorError

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.rig_depth = 0
            self.rig_aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.rig_aliases += 1
                if self.rig_aliases > MAX_ALIASES:
                    raise ComposerError(None, None, f"more than {MAX_ALIASES} aliases", self.peek_event().start_mark)
                anchor = self.peek_event().anchor
                if anchor not in self.anchors:  # PyYAML would raise too; a self-reference is caught here
                    raise ComposerError(
                        None, None, f"alias *{anchor} refers to a node not yet complete", self.peek_event().start_mark
                    )
            self.rig_depth += 1
            try:
                if self.rig_depth > MAX_DEPTH:
                    raise ComposerError(None, None, f"nested more than {MAX_DEPTH} deep", self.peek_event().start_mark)
                return super().compose_node(parent, index)
            finally:
                self.rig_depth -= 1

        def compose_sequence_node(self, anchor: Any) -> Any:
            return self._complete_after(anchor, super().compose_sequence_node)

        def compose_mapping_node(self, anchor: Any) -> Any:
            return self._complete_after(anchor, super().compose_mapping_node)

        def _complete_after(self, anchor: Any, compose: Any) -> Any:
            # PyYAML registers an anchor before composing its children, so `&a [*a]` makes a cycle; hide it until
            # the node is complete and an alias inside it is refused above.
            if anchor is None:
                return compose(anchor)
            node = compose(None)
            self.anchors[anchor] = node
            return node

        def refuse(self, node: Any) -> Any:
            raise ConstructorError(None, None, f"tag {node.tag} is not accepted", node.start_mark)

        def int_bounded(self, node: Any) -> Any:
            raw = str(node.value).replace("_", "").lstrip("+-")
            if len(raw) > MAX_INT_DIGITS:
                raise ConstructorError(None, None, f"integer with {len(raw)} digits", node.start_mark)
            return self.construct_yaml_int(node)

    for tag in (
        "tag:yaml.org,2002:binary",
        "tag:yaml.org,2002:set",
        "tag:yaml.org,2002:omap",
        "tag:yaml.org,2002:pairs",
        "tag:yaml.org,2002:timestamp",
    ):
        BoundedLoader.add_constructor(tag, BoundedLoader.refuse)
    BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.int_bounded)
    # Dates stay strings: no implicit timestamp resolution (an explicit !!timestamp tag is refused above).
    BoundedLoader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    _LOADER = BoundedLoader
    return _LOADER


def load_yaml(text: str, *, max_chars: int = MAX_YAML_CHARS, max_nodes: int = MAX_NODES, finite: bool = True) -> Result:
    """``(value, None)`` or ``(None, reason)``: one YAML document through the bounded safe loader above. A file a lab
    writes (models.yaml) may be larger than a reply (``max_chars``, ``max_nodes``); see ``check_value`` for
    ``finite``."""
    err = too_long(text, max_chars) or _flow_depth_error(text)
    if err:
        return None, err
    import yaml

    loader = None
    try:
        loader = _loader()(_escape_quoted(text))  # the reader checks characters already here
        value = loader.get_single_data()
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError, TypeError) as e:
        return None, "invalid YAML: " + " ".join(str(e).split())[:300]
    finally:
        if loader is not None:
            loader.dispose()
    err = check_value(value, max_nodes=max_nodes, finite=finite)
    return (None, f"invalid YAML: {err}") if err else (value, None)


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*+"|\'(?:[^\']|\'\')*+\'')
# Characters PyYAML refuses (C1 controls, non-characters) or reads as a line break and folds (NEL, U+2028/9, and a
# BOM it drops) where JSON keeps them: inside a double-quoted scalar they are escaped before loading, so a YAML reply
# keeps the string a JSON reply would (rig's YAML grammars admit them there, as its JSON grammars do).
_YAML_UNSAFE = re.compile("[\x80-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _escape_quoted(text: str) -> str:
    if not _YAML_UNSAFE.search(text):
        return text
    return _QUOTED.sub(
        lambda m: _YAML_UNSAFE.sub(lambda c: f"\\u{ord(c[0]):04x}", m[0]) if m[0][0] == '"' else m[0], text
    )


_BRACKET = re.compile(r"[\[\]{}]")


def _flow_depth_error(text: str, kind: str = "YAML") -> str | None:
    """PyYAML's scanner rechecks every open flow level at each token (quadratic in depth), and the JSON parser
    recurses once per level, so deep ``[[[`` is refused before either runs. Brackets inside quoted strings do not
    count; the count can only over-estimate."""
    depth = 0
    for m in _BRACKET.finditer(_QUOTED.sub("", text)):
        depth = depth + 1 if m.group() in "[{" else max(0, depth - 1)
        if depth > MAX_DEPTH:
            return f"invalid {kind}: nested more than {MAX_DEPTH} deep"
    return None


def strip_fences(text: str) -> str:
    """The text inside one pair of Markdown code fences (```lang ... ```), else the stripped text. Linear."""
    t = text.strip()
    if t.startswith("```"):
        i = 3
        while i < len(t) and t[i].isascii() and t[i].isalpha():
            i += 1
        t = t[i:]
    if t.endswith("```"):
        t = t[:-3]
    return t.strip()


def blocks(text: str, start: str, end: str, *, fold: bool = False) -> list[tuple[int, int, bool]]:
    """Non-overlapping ``start ... end`` spans, leftmost first, as (body start, body end, closed); the last may be
    unclosed (body to the end of text). ``fold`` matches the tags ASCII case-insensitively. Linear: one
    ``find`` per tag, never a scan from every position."""
    hay = ascii_lower(text) if fold else text
    if fold:
        start, end = start.lower(), end.lower()
    out: list[tuple[int, int, bool]] = []
    pos = 0
    while True:
        i = hay.find(start, pos)
        if i < 0:
            return out
        j = hay.find(end, i + len(start))
        if j < 0:
            out.append((i + len(start), len(text), False))
            return out
        out.append((i + len(start), j, True))
        pos = j + len(end)


# What moves the object scanner: an escape (a backslash and the character after it), a brace or a double quote.
_OBJECT_MARK = re.compile(r'\\.|[{}"]', re.DOTALL)
MAX_RESCANS = 4  # an unclosed "{" or quote in prose starts the scan again after it at most this often


def object_spans(text: str) -> list[tuple[int, int]]:
    """The outermost balanced ``{...}`` spans of ``text`` as (start, end), leftmost first, braces inside JSON strings
    not counted: where prose carries a JSON object. Quotes outside braces are prose. An opening brace that never
    closes (a ``{`` in prose, a cut reply) restarts the scan just after it, at most ``MAX_RESCANS`` times, so the
    cost stays linear in the text."""
    out: list[tuple[int, int]] = []
    pos = 0
    for _ in range(MAX_RESCANS + 1):
        depth, start, quoted = 0, -1, False
        for m in _OBJECT_MARK.finditer(text, pos):
            c = m.group()
            if len(c) == 2 or (quoted and c != '"'):  # an escape, or a brace inside a string
                continue
            if c == '"':
                quoted = depth > 0 and not quoted
            elif c == "{":
                depth += 1
                start = m.start() if depth == 1 else start
            elif depth:  # "}"
                depth -= 1
                if not depth:
                    out.append((start, m.end()))
        if not depth:
            return out
        pos = start + 1
    return out


_UPPER = {c: c + 32 for c in range(65, 91)}


def ascii_lower(text: str) -> str:
    return text.translate(_UPPER)  # str.lower can change a string's length; this keeps offsets valid
