"""`rig maps` sub-commands: build a map pack from an OSM extract, describe it, query it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import typer

from rig.names import printable

app = typer.Typer(
    help="Offline map packs (OpenStreetMap extracts) and the map tools that answer from them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

KINDS = ("geocode", "reverse", "route", "nearby", "stations", "distance")
DIALECTS = ("plain", "google", "amap")


def _say(msg: str, err: bool = False) -> None:
    """A message that carries data (a path, a name from a pack, an error quoting a value), made printable as
    `rig.cli.common.say` makes every other command's (no escape sequences or bidi controls reach the terminal);
    that module sits above the map service, so the shared `printable` is used here."""
    typer.echo(printable(msg), err=err)


def _fail(msg: str, code: int = 2) -> NoReturn:
    _say(f"error: {msg}", err=True)
    raise typer.Exit(code)


def _point(text: str) -> dict[str, float]:
    parts = text.replace(" ", "").split(",")
    if len(parts) != 2:
        _fail(f"{text!r}: expected LAT,LON")
    try:
        return {"lat": float(parts[0]), "lon": float(parts[1])}
    except ValueError:
        _fail(f"{text!r}: expected LAT,LON as numbers")
    raise AssertionError  # unreachable: _fail raises


@app.command()
def build(
    extract: Path = typer.Argument(..., exists=True, dir_okay=False, help="OpenStreetMap extract (.osm.pbf)."),
    out: Path = typer.Option(..., "--out", "-o", help="Pack directory to write."),
) -> None:
    """Build an offline map pack (graphs, gazetteer, areas) from an .osm.pbf extract."""
    from rig.maps.build import build_pack

    try:
        info = build_pack(extract, out)
    except (OSError, ValueError, RuntimeError) as exc:
        _fail(f"{extract.name}: {exc}")
        return
    c = info.counts
    _say(
        f"built {out} from {info.source_file} in {info.build_seconds:.1f} s: {c['nodes']} nodes, "
        f"{c['edges']} edges, {c['pois']} POIs, {c['streets']} streets, {c['areas']} areas, "
        f"{c['addresses']} addresses, {c['charging_stations']} charging stations"
    )


@app.command()
def info(pack: Path = typer.Argument(..., help="Pack directory.")) -> None:
    """Print a pack's pack.json (source, extent, counts)."""
    from rig.maps.pack_format import read_info

    try:
        typer.echo(read_info(pack).model_dump_json(indent=2))
    except (OSError, ValueError) as exc:
        _fail(str(exc))


def _render(kind: str, dialect: str, data: Any) -> Any:
    from rig.maps import dialects as d

    if dialect == "plain":
        return data
    table = {
        ("google", "geocode"): d.google_geocode,
        ("google", "reverse"): d.google_reverse_geocode,
        ("google", "route"): d.google_directions,
        ("google", "nearby"): d.google_nearby,
        ("google", "stations"): d.google_nearby,
        ("amap", "geocode"): d.amap_place_text,
        ("amap", "reverse"): d.amap_regeo,
        ("amap", "route"): d.amap_direction,
        ("amap", "nearby"): d.amap_place_around,
        ("amap", "stations"): d.amap_place_around,
    }
    fn = table.get((dialect, kind))
    if fn is None:
        _fail(f"no {dialect} rendering for {kind}")
    return fn(data)


@app.command()
def query(
    pack: Path = typer.Argument(..., help="Pack directory."),
    kind: str = typer.Argument(..., help=f"One of: {', '.join(KINDS)}."),
    terms: list[str] = typer.Argument(None, help="geocode: the name; others: LAT,LON points (route: 2 or more)."),
    city: str | None = typer.Option(None, "--city", help="geocode: restrict to this city."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Maximum results."),
    mode: str = typer.Option("walk", "--mode", help="route / network distance: walk, bike or drive."),
    avoid: list[str] = typer.Option([], "--avoid", help="route: tolls, highways, ferries, steps, unpaved, ..."),
    radius: float | None = typer.Option(None, "--radius", help="nearby / stations: radius in metres."),
    category: str | None = typer.Option(None, "--category", help="nearby: OSM category, e.g. cafe."),
    keyword: str | None = typer.Option(None, "--keyword", help="nearby: text in the name."),
    network: bool = typer.Option(False, "--network", help="distance: along the graph instead of straight."),
    dialect: str = typer.Option("plain", "--dialect", help=f"Output shape: {', '.join(DIALECTS)}."),
) -> None:
    """Ask a pack what an agent's map tool would: prints the answer as JSON (exit 2 on a tool error)."""
    from rig.maps.query import load_pack
    from rig.maps.tools import MapService

    if kind not in KINDS:
        _fail(f"unknown query {kind!r}; expected one of {', '.join(KINDS)}")
    if dialect not in DIALECTS:
        _fail(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    terms = terms or []
    try:
        service = MapService(pack=load_pack(pack))
    except (OSError, ValueError) as exc:
        _fail(str(exc))
        return
    opt = {"limit": limit}
    args: dict[str, Any]
    if kind == "geocode":
        tool, args = "geocode", {"query": " ".join(terms), "city": city, **opt}
    elif kind in ("reverse", "nearby", "stations"):
        if len(terms) != 1:
            _fail(f"{kind} takes one LAT,LON point")
        tool = {"reverse": "reverse_geocode", "nearby": "nearby", "stations": "search_stations"}[kind]
        args = {**_point(terms[0])}
        if kind != "reverse":
            args |= {"radius_m": radius, **opt}
        if kind == "nearby":
            args |= {"category": category, "keyword": keyword}
    elif kind == "route":
        if len(terms) < 2:
            _fail("route takes two or more LAT,LON points")
        pts = [_point(t) for t in terms]
        tool, args = (
            "route",
            {"origin": pts[0], "destination": pts[-1], "waypoints": pts[1:-1], "mode": mode, "avoid": avoid},
        )
    else:
        if len(terms) != 2:
            _fail("distance takes two LAT,LON points")
        tool, args = (
            "distance",
            {
                "a": _point(terms[0]),
                "b": _point(terms[1]),
                "kind": "network" if network else "great_circle",
                "mode": mode,
            },
        )
    result = service.call(tool, {k: v for k, v in args.items() if v is not None})
    if not result.ok:
        _fail(f"{result.error_category}: {result.error}")
    typer.echo(json.dumps(_render(kind, dialect, result.data), ensure_ascii=False, indent=2))


@app.command()
def record(
    config: Path = typer.Argument(
        ..., help="Record config (YAML): provider, endpoints {name: {url, key_env, ...}}, keys."
    ),
    queries: Path = typer.Argument(..., help='JSONL, one {"endpoint": ..., "args": {...}} per line.'),
    store: Path = typer.Option(..., "--store", help="Replay store (SQLite) to fill."),
    live: bool = typer.Option(
        False,
        "--record",
        help="Actually call the live provider for misses (lifts the "
        "offline guard for this process). Without it: a dry run.",
    ),
) -> None:
    """Fill a replay store from a live map provider (record mode); without --record, count hits and misses only."""
    from rig.maps.recorder import Recorder, load_record_inputs
    from rig.maps.replay import KeySpec, ReplayStore
    from rig.progress import progress

    try:
        cfg, qs = load_record_inputs(str(config), str(queries))
    except ValueError as e:
        _fail(str(e))
    rs = ReplayStore(store)
    for ep, spec in cfg.keys.items():
        rs.register(cfg.provider, ep, KeySpec.model_validate(spec))
    counts = {"hit": 0, "fuzzy": 0, "miss": 0, "recorded": 0, "failed": 0}
    rec = Recorder(rs, cfg.provider, cfg.endpoints, enable=True) if live else None
    with progress("queries", len(qs), transient=True) as bar:
        for q in qs:
            if rec is None:
                counts[rs.get(cfg.provider, q.endpoint, q.args).label] += 1
            else:
                before = rec.recorded
                try:
                    ans = rec.call(q.endpoint, q.args)
                    counts["recorded" if rec.recorded > before else ans.label] += 1
                except Exception as e:  # one failed request must not lose the others already stored
                    counts["failed"] += 1
                    _say(f"{q.endpoint} {q.args}: {type(e).__name__}: {e}", err=True)
            bar.advance()
    rs.close()
    typer.echo(json.dumps({"provider": cfg.provider, "store": str(store), "live": live, **counts}))
