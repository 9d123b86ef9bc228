"""Reasoning models: keep the thinking block out of what is scored, and out of the constraint's way.

``thinking: strip`` in models.yaml lets the model think; a grammar constraint then starts after ``</think>``
(the grammar admits one leading think block), and the block is removed from the text before parsing.
``thinking: off`` instead asks the chat template not to think (``enable_thinking=False``).

The block has no length bound in the grammar, so every engine constrains to the same language and max_tokens is
the bound: llama.cpp (in llama-cpp-python 0.3.36) does not enforce the upper bound of a repetition of more than
2,000 (the 4,000-character bound rig had was never enforced there), and xgrammar (vLLM) masks the whole
vocabulary at every token inside it: about 1 s per token over Gemma's 262,144 tokens, a 48-token reply in 60 s on
vLLM CPU (benchmarks/results/xgrammar_mask.md).
"""

from __future__ import annotations

import re

from rig.decoding.safe import blocks


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
        'rig-think ::= "<think>" ([^<] | "<" [^/] | "</" [^t] | "</t" [^h])* '
        '"</think>" [ \\n]*\n'
    )
    return think + body
