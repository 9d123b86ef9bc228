"""CallNavi stability scores over repeated runs of the same question.

Both scores are computed exactly as defined in the CallNavi paper (section 5.3).
The upstream repository has no code for them, and the reconstructions in
``benchmark-references.md`` B3.4/B5.5 (modal frequency / N, mean *pairwise*
Levenshtein) give different numbers, so we do not use them.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Sequence

__all__ = [
    "LEV_MAX_CHARS",
    "election_stability",
    "levenshtein_distance",
    "levenshtein_stability",
    "normalise_output",
]

_FENCE = re.compile(r"```[A-Za-z0-9_+.-]*")
_WHITESPACE = re.compile(r"\s+")
# Typographic quotes and single quotes all become '"': models flip between
# Python-repr and JSON quoting across runs without changing the answer.
_QUOTES = str.maketrans(
    {
        "'": '"',
        "\u2018": '"',
        "\u2019": '"',
        "\u201c": '"',
        "\u201d": '"',
    }
)
_INVISIBLE = str.maketrans("", "", "\ufeff\u200b\u200c\u200d\u2060")


def normalise_output(text: str) -> str:
    """Canonical form of a raw output, per the paper's preprocessing.

    Removes code fences, invisible characters and *all* whitespace, unifies
    quote style and lowercases, so outputs differing only in formatting count
    as the same answer. (Removing rather than collapsing whitespace means
    ``"a b"`` equals ``"ab"``; acceptable for JSON answers.)
    """
    text = _FENCE.sub("", str(text))
    text = text.translate(_INVISIBLE).translate(_QUOTES)
    return _WHITESPACE.sub("", text).lower()


def election_stability(outputs: Sequence[str], *, normalise: bool = True) -> float:
    """Election Stability Score = (F1 - F2) / (N - F2); 0 on a tie F1 == F2.

    F1, F2 are the largest and second-largest counts of distinct (normalised)
    outputs, N = len(outputs). One output, or all identical, gives 1.0.
    """
    if len(outputs) == 0:
        raise ValueError("election_stability needs at least one output")
    items = [normalise_output(o) if normalise else o for o in outputs]
    counts = sorted(Counter(items).values(), reverse=True)
    n = len(items)
    f1 = counts[0]
    f2 = counts[1] if len(counts) > 1 else 0
    if f1 == f2:
        return 0.0
    return (f1 - f2) / (n - f2)


@functools.cache
def _rapidfuzz_distance() -> Callable[[str, str], int] | None:
    try:
        from rapidfuzz.distance import Levenshtein
    except ImportError:
        return None
    return Levenshtein.distance


def _levenshtein_dp(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a  # keep the row as short as possible: O(min(len)) memory
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(
                min(
                    previous[j] + 1,  # deletion
                    current[j - 1] + 1,  # insertion
                    previous[j - 1] + (ca != cb),  # substitution
                )
            )
        previous = current
    return previous[-1]


def levenshtein_distance(a: str, b: str) -> int:
    """Unit-cost edit distance; uses rapidfuzz when installed (same result)."""
    fast = _rapidfuzz_distance()
    if fast is not None:
        return int(fast(a, b))
    return _levenshtein_dp(a, b)


# Edit distance costs len(a) * len(b): two 600 KB replies took minutes. The paper's answers are a few hundred
# characters (the longest CallNavi ground truth is 634), so comparing the first LEV_MAX_CHARS of each normalised
# output is the paper's score for every normal answer and bounds the cost for runaway ones.
LEV_MAX_CHARS = 4096


def _similarity(a: str, b: str) -> float:
    a, b = a[:LEV_MAX_CHARS], b[:LEV_MAX_CHARS]
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0  # two empty outputs are identical
    return 1.0 - levenshtein_distance(a, b) / longest


def levenshtein_stability(outputs: Sequence[str], *, normalise: bool = True) -> float:
    """Score_Lev = mean over i=1..n of 1 - lev(x0, xi) / max(|x0|, |xi|).

    The FIRST output is the reference, as in the paper (not all pairs). The
    same preprocessing as the election score is applied unless
    ``normalise=False``. A single output gives 1.0. Outputs are compared on
    their first ``LEV_MAX_CHARS`` characters (after normalisation).
    """
    if len(outputs) == 0:
        raise ValueError("levenshtein_stability needs at least one output")
    items = [normalise_output(o) if normalise else str(o) for o in outputs]
    if len(items) == 1:
        return 1.0
    first, rest = items[0], items[1:]
    return sum(_similarity(first, other) for other in rest) / len(rest)
