from __future__ import annotations

import json

from typer.testing import CliRunner

from rig.maps.cli import app

runner = CliRunner()


def test_info(pack_dir) -> None:
    res = runner.invoke(app, ["info", str(pack_dir)])
    assert res.exit_code == 0 and json.loads(res.output)["city"] == "Helsinki"
    assert runner.invoke(app, ["info", str(pack_dir / "nope")]).exit_code == 2


def test_query_geocode_route_nearby(pack_dir) -> None:
    res = runner.invoke(app, ["query", str(pack_dir), "geocode", "Cafe", "Ekberg", "--limit", "1"])
    assert res.exit_code == 0 and json.loads(res.output)[0]["name"] == "Cafe Ekberg"
    res = runner.invoke(
        app, ["query", str(pack_dir), "route", "60.17,24.944", "60.165,24.94", "--mode", "bike", "--dialect", "google"]
    )
    assert res.exit_code == 0 and json.loads(res.output)["routes"][0]["legs"][0]["steps"]
    res = runner.invoke(app, ["query", str(pack_dir), "nearby", "60.17,24.94", "--radius", "150", "--dialect", "amap"])
    assert res.exit_code == 0 and json.loads(res.output)["status"] == "1"


def test_query_errors_exit_2(pack_dir) -> None:
    res = runner.invoke(app, ["query", str(pack_dir), "nearby", "24.94,60.17"])
    assert res.exit_code == 2 and "swapped" in res.output
    assert runner.invoke(app, ["query", str(pack_dir), "teleport"]).exit_code == 2
    assert runner.invoke(app, ["query", str(pack_dir), "route", "60.17,24.94"]).exit_code == 2


def test_build(helsinki_pbf, tmp_path) -> None:
    res = runner.invoke(app, ["build", str(helsinki_pbf), "--out", str(tmp_path / "p")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "p" / "pack.json").is_file()


def test_an_error_quoting_a_path_reaches_the_terminal_printable(tmp_path) -> None:
    bad = tmp_path / "pack\x1b]0;owned\x07\u202e"  # a terminal title sequence and a bidi override in a name
    res = runner.invoke(app, ["info", str(bad)])
    assert res.exit_code == 2 and "error: " in res.output
    assert "\x1b" not in res.output and "\u202e" not in res.output and "\\x1b" in res.output
