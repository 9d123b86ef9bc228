"""Which part of a reply each token belongs to: JSON/YAML syntax and keys, tool names, argument values, numbers and
coordinates, free text, thinking.

Classes are given to characters of the reply text first (a small scanner over the JSON, Python-literal or block YAML
that benchmarks parse), then to tokens through their detokenised byte spans, so any tokenizer can be lined up.
The scanner never raises and is linear in the text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Literal

TokenClass = Literal["structure", "tool_name", "argument", "number", "free_text", "thinking"]
CLASSES: tuple[TokenClass, ...] = ("structure", "tool_name", "argument", "number", "free_text", "thinking")

# Keys whose values name a tool or API (CallNavi's "API", tool-call envelopes' "name", ...).
TOOL_KEYS = frozenset({"api", "apis", "name", "tool", "tool_name", "function", "function_name", "api_name"})
ARGUMENT_KEYS = frozenset({"parameters", "arguments", "args", "params"})  # below these, "name" is an argument
_NUMBER = re.compile(r"\s*-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*,\s*-?\d+(?:\.\d+)?)*\s*")
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S)
_YAML_LINE = re.compile(r"^(\s*)(-\s+)?(?:([\"']?[\w$ .-]+[\"']?)(\s*:)(?=\s|$))?(.*)$")


def output_names(output: object) -> set[str]:
    """Tool / API names in what the benchmark parsed from a reply: a list of names (CallNavi routing), or the values
    under tool keys of a mapping ({"API": [...], ...}), nested calls included, arguments left out."""
    names: set[str] = set()
    if isinstance(output, list):
        for x in output:
            if isinstance(x, str):
                names.add(x)
            else:
                names |= output_names(x)
    elif isinstance(output, dict):
        for k, v in output.items():
            if isinstance(k, str) and k.lower() in TOOL_KEYS:
                names |= (
                    {v}
                    if isinstance(v, str)
                    else {x for x in v if isinstance(x, str)}
                    if isinstance(v, list)
                    else set()
                )
            elif isinstance(v, (list, dict)) and not (isinstance(k, str) and k.lower() in ARGUMENT_KEYS):
                names |= output_names(v)
    return names


def _value_class(value: str, key: str | None, tools: frozenset[str], in_args: bool = False) -> TokenClass:
    v = value.strip().strip("\"'")
    if not in_args and (v in tools or (key is not None and key.lower() in TOOL_KEYS)):
        return "tool_name"
    if _NUMBER.fullmatch(v):
        return "number"
    return "argument"


def _scan_brackets(text: str, out: list[TokenClass], start: int, tools: frozenset[str]) -> int:
    """Classify a JSON / Python-literal value starting at ``text[start]`` (a bracket); returns where it ends."""
    stack: list[list] = []  # [bracket, key in force, inside a call's arguments]
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c in "{[":
            inherited = stack[-1][1] if stack and c == "[" else None
            in_args = bool(stack) and (stack[-1][2] or str(stack[-1][1]).lower() in ARGUMENT_KEYS)
            stack.append([c, inherited, in_args])
            out[i] = "structure"
            i += 1
        elif c in "}]":
            out[i] = "structure"
            i += 1
            if stack:
                stack.pop()
            if not stack:
                return i
        elif c in ":,":
            out[i] = "structure"
            if c == "," and stack and stack[-1][0] == "{":
                stack[-1][1] = None
            i += 1
        elif c.isspace():
            out[i] = "structure"
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            end = min(j, n)
            body = text[i + 1 : end]
            k = end + 1
            while k < n and text[k].isspace():
                k += 1
            is_key = bool(stack) and stack[-1][0] == "{" and k < n and text[k] == ":"
            key, in_args = (stack[-1][1], stack[-1][2]) if stack else (None, False)
            cls: TokenClass = "structure" if is_key else _value_class(body, key, tools, in_args)
            out[i] = "structure"
            for m in range(i + 1, end):
                out[m] = cls
            if end < n:
                out[end] = "structure"
            if is_key and stack:
                stack[-1][1] = body
            i = end + 1
        else:  # a bare number, literal or identifier
            j = i
            while j < n and not text[j].isspace() and text[j] not in "{}[]:,\"'":
                j += 1
            key, in_args = (stack[-1][1], stack[-1][2]) if stack else (None, False)
            cls = _value_class(text[i:j], key, tools, in_args)
            for m in range(i, j):
                out[m] = cls
            i = j
    return i


def _scan_yaml(text: str, out: list[TokenClass], lo: int, hi: int, tools: frozenset[str]) -> None:
    pos = lo
    parent: str | None = None
    for line in text[lo:hi].splitlines(keepends=True):
        m = _YAML_LINE.match(line.rstrip("\r\n"))
        body_end = pos + len(line.rstrip("\r\n"))
        for k in range(pos, pos + len(line)):
            out[k] = "structure"
        if m:
            at = pos + len(m.group(1)) + len(m.group(2) or "")
            key = m.group(3)
            value_start = at
            if key is not None:
                value_start = at + len(key) + len(m.group(4))
                if not m.group(5).strip():
                    parent = key.strip("\"' ")
            value = text[value_start:body_end]
            if value.strip():
                owner = key.strip("\"' ") if key is not None else parent
                cls = _value_class(value, owner, tools)
                for k in range(value_start, body_end):
                    if not text[k].isspace() or value.strip(" ") != value.strip():
                        out[k] = cls
                # quotes around a scalar are syntax
                v0 = value_start + (len(value) - len(value.lstrip()))
                v1 = body_end - (len(value) - len(value.rstrip()))
                if v1 - v0 >= 2 and text[v0] == text[v1 - 1] and text[v0] in "\"'":
                    out[v0] = out[v1 - 1] = "structure"
        pos += len(line)


def _looks_yaml(segment: str) -> bool:
    lines = [x for x in segment.splitlines() if x.strip()]
    return bool(lines) and all(re.match(r"^\s*(-\s|[\"']?[\w$ .-]+[\"']?\s*:(\s|$))", x) for x in lines)


def char_classes(text: str, tools: Iterable[str] = ()) -> list[TokenClass]:
    """A class for every character of a reply."""
    names = frozenset(tools)
    out: list[TokenClass] = ["free_text"] * len(text)
    taken = [False] * len(text)
    for m in _THINK.finditer(text):
        for k in range(m.start(), m.end()):
            out[k] = "thinking"
            taken[k] = True
    i = 0
    while i < len(text):
        if taken[i]:
            i += 1
            continue
        if text.startswith("```", i):
            j = text.find("\n", i)
            j = len(text) if j < 0 else j + 1
            for k in range(i, j):
                out[k] = "structure"
            i = j
            continue
        if text[i] in "{[":
            i = _scan_brackets(text, out, i, names)
            continue
        i += 1
    # A reply without brackets that is all block-YAML lines (CallNavi --format yaml) is scanned as YAML.
    free = [k for k in range(len(text)) if out[k] == "free_text"]
    if free and not any(c in text for c in "{[") and _looks_yaml(text.replace("```", "")):
        _scan_yaml(text, out, 0, len(text), names)
        for m in _THINK.finditer(text):
            for k in range(m.start(), m.end()):
                out[k] = "thinking"
        for m in re.finditer(r"```[^\n]*\n?", text):
            for k in range(m.start(), m.end()):
                out[k] = "structure"
    return out


def token_classes(text: str, pieces: list[bytes], tools: Iterable[str] = ()) -> list[TokenClass]:
    """A class per token: the most frequent class among the token's non-space bytes (its spaces' class when it has
    none). ``pieces`` are the tokens' detokenised bytes; past the end of ``text`` a token is free text."""
    chars = char_classes(text, tools)
    per_byte: list[tuple[TokenClass, bool]] = []
    for ch, cls in zip(text, chars, strict=True):
        per_byte.extend([(cls, ch.isspace())] * len(ch.encode("utf-8")))
    out: list[TokenClass] = []
    pos = 0
    for p in pieces:
        span = per_byte[pos : pos + len(p)]
        pos += len(p)
        solid = Counter(c for c, space in span if not space)
        if solid:
            out.append(solid.most_common(1)[0][0])
        elif span:
            out.append(span[0][0])
        else:
            out.append("free_text")
    return out
