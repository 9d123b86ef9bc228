"""Reasoning models: keep the thinking block out of what is scored, and out of the constraint's way.

``thinking: strip`` in models.yaml lets the model think; a grammar constraint then starts after ``</think>``
(the grammar admits one leading think block), and the block is removed from the text before parsing.
``thinking: off`` instead asks the chat template not to think (``enable_thinking=False``).
"""

from __future__ import annotations

import re

from rig.decoding.safe import blocks

MAX_THINK_CHARS = 4000  # a bound, so a grammar-constrained model cannot think until max_tokens


def strip_thinking(text: str) -> str:
    """Remove every closed ``<think>...</think>`` block (leftmost first), then anything up to a stray
    ``</think>``. Linear in the text: an unclosed ``<think>`` ends the search instead of being retried."""
    kept = []
    pos = 0
    for body_start, body_end, closed in blocks(text, "<think>", "</think>"):
        if not closed:
            break
        kept.append(text[pos : body_start - len("<think>")])
        pos = body_end + len("</think>")
    text = "".join(kept) + text[pos:]
    return text.split("</think>", 1)[-1].lstrip() if "</think>" in text else text.lstrip()


def allow_thinking_gbnf(gbnf: str) -> str:
    """Prefix a GBNF grammar with an optional think block; the original root becomes ``rig-answer``."""
    if not re.search(r"^root\s*::=", gbnf, flags=re.M):
        raise ValueError("grammar has no root rule")
    body = re.sub(r"^root(\s*::=)", r"rig-answer\1", gbnf, count=1, flags=re.M)
    body = re.sub(r"(?<![\w-])root(?![\w-])", "rig-answer", body)  # references to root elsewhere
    think = (
        "root ::= rig-think? rig-answer\n"
        f'rig-think ::= "<think>" ([^<] | "<" [^/] | "</" [^t] | "</t" [^h]){{0,{MAX_THINK_CHARS}}} '
        '"</think>" [ \\n]*\n'
    )
    return think + body
