"""Random schema instances (in declared key order) and random one-character mutations of documents."""

from __future__ import annotations

import random
from typing import Any

from rig.decoding.schema import AnyValue, Arr, Enum, Normalizer, Obj, Prim, Union_

# Characters that stress escaping in both formats: quotes, backslash, controls, YAML specials, non-ASCII.
CHARS = [*"abcXYZ 09_-:#'\"\\/{}[],&*!|>%@\t\n", "\x01", "\x7f", "\x85", "\u00e9", "\u2028", "\u65e5", "\U0001f600"]


def sample(schema: Any, rng: random.Random, norm: Normalizer | None = None, depth: int = 0) -> Any:
    norm = norm or Normalizer(schema)
    sh = norm.shape(schema)
    if isinstance(sh, Union_):
        return sample(rng.choice(sh.options), rng, norm, depth)
    if isinstance(sh, Enum):
        return rng.choice(sh.values)
    if isinstance(sh, Prim) and sh.type == "string":
        hi = sh.max_len if sh.max_len is not None else sh.min_len + 8
        return "".join(rng.choice(CHARS) for _ in range(rng.randint(sh.min_len, hi)))
    if isinstance(sh, Prim):
        return _prim(sh.type, rng)
    if isinstance(sh, AnyValue):
        return _any(rng, depth)
    if isinstance(sh, Arr):
        hi = sh.max if sh.max is not None else sh.min + 3
        return [sample(sh.items, rng, norm, depth + 1) for _ in range(rng.randint(sh.min, hi))]
    assert isinstance(sh, Obj)
    if not sh.props:
        if sh.extra is False:
            return {}
        hi = 3 if sh.max_entries is None else min(3, sh.max_entries)
        return {_key(rng): sample(sh.extra, rng, norm, depth + 1) for _ in range(rng.randint(0, hi))}
    return {p.name: sample(p.schema, rng, norm, depth + 1) for p in sh.props if p.required or rng.random() < 0.5}


def _prim(t: str, rng: random.Random) -> Any:
    if t == "string":
        return "".join(rng.choice(CHARS) for _ in range(rng.randint(0, 8)))
    if t == "integer":
        return rng.choice([0, -1, 7, 123456789012, -42])
    if t == "number":
        return rng.choice([0, -3, 2.5, -0.125, 1e20, 6.02e-23, 1234.5678])
    if t == "boolean":
        return rng.random() < 0.5
    return None


def _any(rng: random.Random, depth: int) -> Any:
    kinds = ["string", "integer", "number", "boolean", "null"] + (["object", "array"] if depth < 3 else [])
    k = rng.choice(kinds)
    if k == "object":
        return {_key(rng): _any(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    if k == "array":
        return [_any(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return _prim(k, rng)


def _key(rng: random.Random) -> str:
    return rng.choice(["k", "user_id", "on", "a b", "Date", "_x1", "\u00e9t\u00e9", "yes", "n", "1st"])


def mutate(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text) + 1)
    op = rng.choice(["insert", "delete", "replace", "dup"])
    c = rng.choice(CHARS + list(' \n"{}[],:-'))
    if op == "insert" or not text:
        return text[:i] + c + text[i:]
    i = min(i, len(text) - 1)
    if op == "delete":
        return text[:i] + text[i + 1 :]
    if op == "replace":
        return text[:i] + c + text[i + 1 :]
    j = rng.randrange(i, min(len(text), i + 12) + 1)
    return text[:j] + text[i:j] + text[j:]


def mutate_value(v: Any, rng: random.Random) -> Any:
    """A structurally perturbed copy: swap a scalar's type, drop or add a key, drop or add an item."""
    if isinstance(v, dict) and v and rng.random() < 0.7:
        k = rng.choice(list(v))
        out = dict(v)
        r = rng.random()
        if r < 0.3:
            del out[k]
        elif r < 0.5:
            out[_key(rng)] = _any(rng, 2)
        else:
            out[k] = mutate_value(v[k], rng)
        return out
    if isinstance(v, list) and v and rng.random() < 0.7:
        out = list(v)
        i = rng.randrange(len(v))
        r = rng.random()
        if r < 0.3:
            del out[i]
        elif r < 0.5:
            out.append(_any(rng, 2))
        else:
            out[i] = mutate_value(v[i], rng)
        return out
    return _any(rng, 2)
