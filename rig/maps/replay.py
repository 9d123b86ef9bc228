"""Replay store: recorded map-provider responses in one SQLite file, looked up by canonical arguments.

Key = provider + endpoint + canonical JSON of the arguments, canonicalised per endpoint by a declared KeySpec:
coordinates rounded to `precision` decimals and written "lat,lon" (whatever order the provider used), names
NFKC + casefold + collapsed whitespace, times ISO-8601 UTC, None dropped. Lookups return a labelled answer:
hit (exact key), fuzzy (name within a rapidfuzz threshold, or coordinates within a distance bound, all other
arguments equal) or miss. Fallbacks are off unless the caller's ReplayPolicy turns them on.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rig.maps.geo import haversine_m, metres_to_chord, to_xyz
from rig.maps.text import normalise_name

STORE_FORMAT = 1


class CoordField(BaseModel):
    """Where a coordinate sits in the arguments and how it is written there."""

    model_config = ConfigDict(extra="forbid")
    name: str  # the argument; with lon_arg set, the latitude argument of a pair of scalars
    order: Literal["lat,lon", "lon,lat"] = "lat,lon"  # order of the two numbers in a string or list value
    lon_arg: str | None = None  # separate longitude argument (e.g. latitude=..., longitude=...)
    many: bool = False  # a list of coordinates, or one string joined with ";" (AMap waypoints)


class KeySpec(BaseModel):
    """How one endpoint's arguments become a key. Stored in the file, so a store describes itself."""

    model_config = ConfigDict(extra="forbid")
    precision: int = Field(default=6, ge=0, le=9)
    coords: list[CoordField] = Field(default_factory=list)
    names: list[str] = Field(default_factory=list)
    times: list[str] = Field(default_factory=list)
    ignore: list[str] = Field(default_factory=list)  # arguments that do not change the answer
    fuzzy_field: str | None = None  # one of `names`: the fuzzy-name fallback compares it
    spatial_fields: list[str] | None = None  # coordinate names for the nearest fallback (default: single coords)

    @model_validator(mode="after")
    def _check(self) -> KeySpec:
        if self.fuzzy_field and self.fuzzy_field not in self.names:
            raise ValueError("fuzzy_field must be one of names")
        coord_names = {c.name for c in self.coords}
        if self.spatial_fields is not None and not set(self.spatial_fields) <= coord_names:
            raise ValueError("spatial_fields must name coords")
        return self

    def spatial(self) -> list[str]:
        if self.spatial_fields is not None:
            return list(self.spatial_fields)
        return [c.name for c in self.coords if not c.many]


class ReplayPolicy(BaseModel):
    """Which fallbacks a tool allows after an exact miss. The default is strict: exact keys only."""

    model_config = ConfigDict(extra="forbid")
    fuzzy_names: bool = False
    fuzzy_threshold: float = Field(default=90.0, ge=0, le=100)  # rapidfuzz ratio on normalised names
    nearest: bool = False
    max_distance_m: float = Field(default=50.0, gt=0)  # every spatial coordinate must be within this


class ReplayAnswer(BaseModel):
    label: Literal["hit", "fuzzy", "miss"]
    response: Any = None
    provider: str
    endpoint: str
    key: str  # canonical key asked for
    matched_key: str | None = None  # key of the stored entry that answered
    fallback: Literal["name", "nearest"] | None = None
    similarity: float | None = None  # rapidfuzz score of a fuzzy-name answer
    distance_m: float | None = None  # largest coordinate offset of a nearest answer


class CanonicalError(ValueError):
    """Arguments that cannot be canonicalised under the endpoint's KeySpec (bad coordinate, bad time)."""


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _pair(value: Any, order: str) -> tuple[float, float]:
    a: Any
    b: Any
    if isinstance(value, Mapping):
        a, b = value.get("lat"), value.get("lon", value.get("lng"))
        order = "lat,lon"
    elif isinstance(value, str):
        parts = value.split(",")
        if len(parts) != 2:
            raise CanonicalError(f"coordinate {value!r}: expected two comma-separated numbers")
        a, b = parts
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        a, b = value
    else:
        raise CanonicalError(f"coordinate {value!r}: expected 'a,b', [a, b] or {{lat, lon}}")
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError) as exc:
        raise CanonicalError(f"coordinate {value!r}: not numeric") from exc
    lat, lon = (x, y) if order == "lat,lon" else (y, x)
    if not (math.isfinite(lat) and math.isfinite(lon) and -90 <= lat <= 90 and -180 <= lon <= 180):
        raise CanonicalError(f"coordinate {value!r}: out of range for {order}")
    return lat, lon


def _fmt(lat: float, lon: float, p: int) -> str:
    # "+ 0.0" turns -0.0 into 0.0, so "-0.000000" never becomes a distinct key.
    return f"{round(lat, p) + 0.0:.{p}f},{round(lon, p) + 0.0:.{p}f}"


def canonical_time(value: Any) -> str:
    """ISO-8601 UTC with a Z; naive times are taken as UTC, numbers as Unix seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        dt = datetime.fromtimestamp(value, tz=timezone.utc)
    elif isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError as exc:
            raise CanonicalError(f"time {value!r}: not ISO-8601") from exc
    else:
        raise CanonicalError(f"time {value!r}: expected ISO-8601 text or Unix seconds")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


class Canonical(BaseModel):
    key: str
    ctx_name: str  # the key without the fuzzy name field: a name fallback must match it exactly
    ctx_point: str  # the key without the spatial fields: a nearest fallback must match it exactly
    args: dict[str, Any]
    name: str | None = None
    points: list[tuple[float, float]] = Field(default_factory=list)  # spatial coordinates, (lat, lon)


def canonicalise(args: Mapping[str, Any], spec: KeySpec) -> Canonical:
    out: dict[str, Any] = {}
    points: dict[str, tuple[float, float]] = {}
    handled = set(spec.ignore)
    for c in spec.coords:
        handled.add(c.name)
        if c.lon_arg:
            handled.add(c.lon_arg)
            if args.get(c.name) is None and args.get(c.lon_arg) is None:
                continue
            lat, lon = _pair([args.get(c.name), args.get(c.lon_arg)], "lat,lon")
            points[c.name] = (lat, lon)
            out[c.name] = _fmt(lat, lon, spec.precision)
            continue
        v = args.get(c.name)
        if v is None:
            continue
        if c.many:
            items = [s for s in v.split(";") if s.strip()] if isinstance(v, str) else list(v)
            out[c.name] = [_fmt(*_pair(item, c.order), spec.precision) for item in items]
        else:
            lat, lon = _pair(v, c.order)
            points[c.name] = (lat, lon)
            out[c.name] = _fmt(lat, lon, spec.precision)
    for n in spec.names:
        handled.add(n)
        if args.get(n) is not None:
            out[n] = normalise_name(str(args[n]))
    for t in spec.times:
        handled.add(t)
        if args.get(t) is not None:
            out[t] = canonical_time(args[t])
    for k, v in args.items():
        if k not in handled and v is not None:
            out[k] = v
    spatial = spec.spatial()
    return Canonical(
        key=_dumps(out),
        args=out,
        ctx_name=_dumps({k: v for k, v in out.items() if k != spec.fuzzy_field}),
        ctx_point=_dumps({k: v for k, v in out.items() if k not in spatial}),
        name=out.get(spec.fuzzy_field) if spec.fuzzy_field else None,
        points=[points[f] for f in spatial] if all(f in points for f in spatial) else [],
    )


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS specs (provider TEXT NOT NULL, endpoint TEXT NOT NULL, spec TEXT NOT NULL,
                                  PRIMARY KEY (provider, endpoint));
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY, provider TEXT NOT NULL, endpoint TEXT NOT NULL, key TEXT NOT NULL,
    ctx_name TEXT NOT NULL, ctx_point TEXT NOT NULL, name TEXT, points TEXT, response TEXT NOT NULL,
    recorded_at TEXT NOT NULL, UNIQUE (provider, endpoint, key)
);
CREATE INDEX IF NOT EXISTS entries_ctx_name ON entries (provider, endpoint, ctx_name);
CREATE INDEX IF NOT EXISTS entries_ctx_point ON entries (provider, endpoint, ctx_point);
"""


class _NameGroup:
    """Fuzzy-name index of one (provider, endpoint, context). Two exact filters keep a lookup from scoring
    every entry: a ratio threshold bounds the length of any name that can reach it, and an Indel edit removes
    at most two of the query's distinct bigrams, so a candidate must share at least |bigrams| - 2 * max_edits."""

    columns = ("name", "ctx_name")  # the entries' column it indexes, the context column that groups them

    def __init__(self, rows: list[tuple[int, str]]) -> None:
        self.ids = np.array([r[0] for r in rows], dtype=np.int64)
        self.names = [r[1] for r in rows]
        self.lengths = np.array([len(n) for n in self.names], dtype=np.int32)
        vocab: dict[str, int] = {}
        owners: list[int] = []
        grams: list[int] = []
        for i, n in enumerate(self.names):
            for g in {n[k : k + 2] for k in range(len(n) - 1)}:
                grams.append(vocab.setdefault(g, len(vocab)))
                owners.append(i)
        self.vocab = vocab
        g_arr, o_arr = np.array(grams, dtype=np.int64), np.array(owners, dtype=np.int32)
        order = np.argsort(g_arr, kind="stable")
        self.post = o_arr[order]  # name indices grouped by bigram id
        self.post_start = np.searchsorted(g_arr[order], np.arange(len(vocab) + 1))

    def best(self, q: str, threshold: float) -> tuple[int, float] | None:
        from rapidfuzz import fuzz, process

        if not self.names:
            return None
        t = max(threshold, 1e-9) / 100.0
        lb_min, lb_max = math.floor(len(q) * t / (2 - t)), math.ceil(len(q) * (2 - t) / t)
        max_edits = math.floor((len(q) + lb_max) * (1 - t))
        qgrams = {q[k : k + 2] for k in range(len(q) - 1)}
        need = len(qgrams) - 2 * max_edits
        ok = (self.lengths >= lb_min) & (self.lengths <= lb_max)
        if need > 0:
            ids = [self.vocab[g] for g in qgrams if g in self.vocab]
            if not ids:
                return None
            hits = np.concatenate([self.post[self.post_start[g] : self.post_start[g + 1]] for g in ids])
            ok &= np.bincount(hits, minlength=len(self.names)) >= need
        cand = np.nonzero(ok)[0]
        if not len(cand):
            return None
        hit = process.extractOne(
            q, [self.names[i] for i in cand], scorer=fuzz.ratio, processor=None, score_cutoff=threshold
        )
        if hit is None:
            return None
        return int(self.ids[cand[hit[2]]]), float(hit[1])


class _PointGroup:
    """KD-tree (unit-sphere xyz) on the first spatial coordinate of each entry of one context."""

    columns = ("points", "ctx_point")

    def __init__(self, rows: list[tuple[int, str]]) -> None:
        from scipy.spatial import cKDTree

        self.ids = np.array([r[0] for r in rows], dtype=np.int64)
        self.points = np.array([json.loads(r[1]) for r in rows], dtype=np.float64)  # (n, k, 2)
        self.tree = cKDTree(to_xyz(self.points[:, 0, 0], self.points[:, 0, 1])) if len(rows) else None

    def nearest(self, pts: list[tuple[float, float]], bound_m: float) -> tuple[int, float] | None:
        if self.tree is None or self.points.shape[1] != len(pts):
            return None
        cand = self.tree.query_ball_point(to_xyz([pts[0][0]], [pts[0][1]])[0], metres_to_chord(bound_m))
        best = None
        for j in sorted(cand):
            worst = max(
                haversine_m(p[0], p[1], float(s[0]), float(s[1])) for p, s in zip(pts, self.points[j], strict=True)
            )
            if worst <= bound_m and (best is None or worst < best[1]):
                best = (int(self.ids[j]), worst)
        return best


G = TypeVar("G", _NameGroup, _PointGroup)


class ReplayStore:
    """One SQLite file of recorded responses (one store per map pack). Not thread-safe; one per process."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._con = sqlite3.connect(self.path)
        self._con.executescript(_SCHEMA)
        fmt = self._con.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        if fmt is None:
            self._con.execute("INSERT INTO meta VALUES ('format', ?)", (str(STORE_FORMAT),))
            self._con.commit()
        elif int(fmt[0]) != STORE_FORMAT:
            raise ValueError(f"{self.path.name}: replay store format {fmt[0]}, this rig reads {STORE_FORMAT}")
        self._specs: dict[tuple[str, str], KeySpec] = {
            (p, e): KeySpec.model_validate_json(s) for p, e, s in self._con.execute("SELECT * FROM specs")
        }
        self._names: dict[tuple[str, str, str], _NameGroup] = {}
        self._points: dict[tuple[str, str, str], _PointGroup] = {}
        self.counts: Counter[str] = Counter()  # answers by label since this instance opened

    @property
    def misses(self) -> int:
        return self.counts["miss"]

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> ReplayStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- specs ---------------------------------------------------------------------------------------

    def register(self, provider: str, endpoint: str, spec: KeySpec) -> None:
        """Declare how an endpoint's arguments are keyed. A spec cannot change once entries use it."""
        old = self._specs.get((provider, endpoint))
        if old == spec:
            return
        if (
            old is not None
            and self._con.execute(
                "SELECT 1 FROM entries WHERE provider=? AND endpoint=? LIMIT 1", (provider, endpoint)
            ).fetchone()
        ):
            raise ValueError(f"{provider}/{endpoint}: entries exist under another KeySpec; use a new store")
        self._con.execute("INSERT OR REPLACE INTO specs VALUES (?,?,?)", (provider, endpoint, spec.model_dump_json()))
        self._con.commit()
        self._specs[(provider, endpoint)] = spec

    def spec(self, provider: str, endpoint: str) -> KeySpec:
        return self._specs.get((provider, endpoint)) or KeySpec()

    # -- writing -------------------------------------------------------------------------------------

    def put(
        self, provider: str, endpoint: str, args: Mapping[str, Any], response: Any, recorded_at: str | None = None
    ) -> str:
        """Store (or replace) the response for these arguments; returns the canonical key."""
        return self.put_many(provider, endpoint, [(args, response)], recorded_at)[0]

    def put_many(
        self,
        provider: str,
        endpoint: str,
        items: Iterable[tuple[Mapping[str, Any], Any]],
        recorded_at: str | None = None,
    ) -> list[str]:
        spec = self.spec(provider, endpoint)
        when = recorded_at or datetime.now(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        rows, keys, name_ctx, point_ctx = [], [], set(), set()
        for args, response in items:
            c = canonicalise(args, spec)
            rows.append(
                (
                    provider,
                    endpoint,
                    c.key,
                    c.ctx_name,
                    c.ctx_point,
                    c.name,
                    _dumps(c.points) if c.points else None,
                    _dumps(response),
                    when,
                )
            )
            keys.append(c.key)
            name_ctx.add(c.ctx_name)
            point_ctx.add(c.ctx_point)
        with self._con:
            self._con.executemany(
                "INSERT INTO entries (provider, endpoint, key, ctx_name, ctx_point, name, points, response,"
                " recorded_at) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (provider, endpoint, key) DO UPDATE SET"
                " response=excluded.response, recorded_at=excluded.recorded_at",
                rows,
            )
        for ctx in name_ctx:  # indexes of touched groups are rebuilt lazily on the next fallback lookup
            self._names.pop((provider, endpoint, ctx), None)
        for ctx in point_ctx:
            self._points.pop((provider, endpoint, ctx), None)
        return keys

    # -- reading -------------------------------------------------------------------------------------

    def get(
        self, provider: str, endpoint: str, args: Mapping[str, Any], policy: ReplayPolicy | None = None
    ) -> ReplayAnswer:
        policy = policy or ReplayPolicy()
        c = canonicalise(args, self.spec(provider, endpoint))
        answer = self._lookup(provider, endpoint, c, policy)
        self.counts[answer.label] += 1
        return answer

    def _row(self, entry_id: int) -> tuple[str, str]:
        return self._con.execute("SELECT key, response FROM entries WHERE id=?", (entry_id,)).fetchone()

    def _group(self, cache: dict[tuple[str, str, str], G], make: type[G], gkey: tuple[str, str, str]) -> G:
        """The fallback index of one (provider, endpoint, context), built on first use."""
        if gkey not in cache:
            column, ctx = make.columns
            cache[gkey] = make(
                self._con.execute(
                    f"SELECT id, {column} FROM entries WHERE provider=? AND endpoint=? AND {ctx}=?"
                    f" AND {column} IS NOT NULL",
                    gkey,
                ).fetchall()
            )
        return cache[gkey]

    def _fuzzy(self, entry_id: int, base: dict[str, Any], **how: Any) -> ReplayAnswer:
        key, response = self._row(entry_id)
        return ReplayAnswer(label="fuzzy", response=json.loads(response), matched_key=key, **how, **base)

    def _lookup(self, provider: str, endpoint: str, c: Canonical, policy: ReplayPolicy) -> ReplayAnswer:
        base: dict[str, Any] = {"provider": provider, "endpoint": endpoint, "key": c.key}
        row = self._con.execute(
            "SELECT response FROM entries WHERE provider=? AND endpoint=? AND key=?", (provider, endpoint, c.key)
        ).fetchone()
        if row:
            return ReplayAnswer(label="hit", response=json.loads(row[0]), matched_key=c.key, **base)
        if policy.fuzzy_names and c.name:
            names = self._group(self._names, _NameGroup, (provider, endpoint, c.ctx_name))
            best = names.best(c.name, policy.fuzzy_threshold)
            if best is not None:
                return self._fuzzy(best[0], base, fallback="name", similarity=round(best[1], 2))
        if policy.nearest and c.points:
            points = self._group(self._points, _PointGroup, (provider, endpoint, c.ctx_point))
            best = points.nearest(c.points, policy.max_distance_m)
            if best is not None:
                return self._fuzzy(best[0], base, fallback="nearest", distance_m=round(best[1], 2))
        return ReplayAnswer(label="miss", **base)

    # -- bookkeeping ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._con.execute("SELECT COUNT(*) FROM entries").fetchone()[0]

    def content_hash(self) -> str:
        """sha256 of the store's logical content (specs and entries in key order), for the run manifest.
        Independent of SQLite page layout, so equal contents give equal hashes on every machine."""
        h = hashlib.sha256()
        for row in self._con.execute("SELECT provider, endpoint, spec FROM specs ORDER BY provider, endpoint"):
            h.update(("S\x1f" + "\x1f".join(row) + "\n").encode())
        for row in self._con.execute(
            "SELECT provider, endpoint, key, response FROM entries ORDER BY provider, endpoint, key"
        ):
            h.update(("E\x1f" + "\x1f".join(row) + "\n").encode())
        return h.hexdigest()
