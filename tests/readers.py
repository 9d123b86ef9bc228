"""Every reader of model text, as ``name -> read(text)``, for the fuzz tests and scripts/fuzz_readers.py.

``read`` returns None when the text was read as an answer, or the format error a benchmark scores; any exception
escaping it is a bug (it would be recorded as an engine crash)."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from rig.decoding.constraint import Constraint
from rig.records import Generation, ToolSpec

_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array"}}}
_TOOL = ToolSpec(name="f", description="d", parameters={"type": "object", "properties": {"x": {"type": "number"}}})


def _encodable(value: Any) -> None:
    json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")  # what the store must be able to do


def _callnavi(fmt: str) -> Callable[[str], str | None]:
    def read(text: str) -> str | None:
        from rig.benchmarks.callnavi.parse import parse_answer

        value, err = parse_answer(text, fmt, dict)
        if err is None:
            _encodable(value)
        return err

    return read


def _parse_output(kind: str) -> Callable[[str], str | None]:
    def read(text: str) -> str | None:
        from rig.decoding.output import parse_output

        value, err = parse_output(text, Constraint(kind=kind, schema_=_SCHEMA))  # type: ignore[arg-type]
        if err is None:
            _encodable(value)
        return err

    return read


def _textcalls(text: str) -> str | None:
    from rig.engines.textcalls import calls_from_text

    found = calls_from_text(text)
    if found is None:
        return "no call"
    calls, status = found
    _encodable([c.model_dump() for c in calls])
    return None if status == "ok" else status


def _thinking(text: str) -> str | None:
    from rig.engines.thinking import strip_thinking

    assert isinstance(strip_thinking(text), str)
    return None


def _toolmode(mode: str) -> Callable[[str], str | None]:
    def read(text: str) -> str | None:
        from rig.agents.toolmode import extract_calls

        calls, _, why = extract_calls(Generation(request_hash="fuzz", text=text), [_TOOL], mode)
        _encodable([c.model_dump() for c in calls])
        return why

    return read


def _judge(text: str) -> str | None:
    from rig.benchmarks.urbangeo.judge import parse_verdict

    v = parse_verdict(text, 10)
    return None if v.ok else v.status


def _urbangeo(text: str) -> str | None:
    from rig.benchmarks.urbangeo.scoring import parse_letter, program_answer, sections

    parse_letter(text, "ABCD", ["Kiasma", "Ateneum", "Oodi", "Amos Rex"])
    sec = sections(text)
    truth = {
        "km": 3.2,
        "bearing": 45.0,
        "labels": ["Intersecting", "Parallel", "Touch"],
        "label": "Parallel",
        "order": ["A st", "B st"],
        "candidates": ["Kiasma", "Oodi"],
        "destination": "Oodi",
        "poi": "Oodi",
        "streets": ["Mannerheimintie"],
    }
    for task in ("DS", "DR", "RE", "PN", "PR", "NV", "RC"):
        _encodable(program_answer(task, text, truth, {"names": ["A st", "B st"]}))
    return None if sec.status == "ok" else sec.status


def _mobilitybench(text: str) -> str | None:
    from rig.benchmarks.mobilitybench.scoring import text as T

    lex = SimpleNamespace(lon_range=(24.0, 26.0), lat_range=(59.0, 61.0))
    block = T.fenced_json(text)
    T.norm(text)
    _encodable(
        [
            T.coords_in(text, lex),
            T.stated_distances_m(text),
            T.stated_durations_s(text),
            T.stated_clocks_min(text),
            block,
        ]
    )
    return None if block is not None else "no json block"


def _callnavi_reference(text: str) -> str | None:
    from rig.benchmarks.callnavi.benchmark import score_output
    from rig.runs.store import sanitize

    gt = {"API": ["getWeather"], "parameters": [{"city": "Oulu"}]}
    errors = []
    for task in ("routing", "params"):
        _, value, err = score_output(text, gt, task, "json", "reference")
        _encodable(sanitize(value, set()))  # Python's json.loads, as upstream: NaN or a lone surrogate is cleaned
        errors.append(err)
    return "; ".join(e for e in errors if e) or None


_MB_TRUTHS = [
    ("Route-Constrained Planning", {"matched_transit_index": 1}),
    ("POI Query", {"poi_result": {"name": "Oodi", "location": "24.9,60.1"}}),
    ("Geolocation Query", {"formatted_address": "Töölönlahdenkatu 4"}),
    ("Nearby Query", {"near_poi_ans": "{'data': {'pois': [{'name': 'Oodi'}]}}"}),
    ("Weather Query", {"weather_description": "sunny"}),
    ("Traffic Info Query", {"ans": {"trafficinfo": {"description": "slow traffic"}}}),
    ("Other", {"route_ans": "1"}),
]


def _mobilitybench_score(text: str) -> str | None:
    """Both metric modes over the reporter text (reference mode reads its ```json fence) and the final answer."""
    from rig.benchmarks.mobilitybench import scoring as M
    from rig.benchmarks.mobilitybench.similarity import CharJaccard

    pred = M.Prediction(intent=text[:200], steps=[text[:200]], content=text, report=text, delivered=True)
    for scenario, slots in _MB_TRUTHS:
        for mode in ("paper", "reference"):
            _encodable(M.score(pred, M.Truth(scenario=scenario, slots=slots), mode, CharJaccard()))
    return None


def _routeeval(text: str) -> str | None:
    from rig.benchmarks.routeeval.scoring import check_call
    from rig.decoding.safe import load_json

    args, err = load_json(text)
    if err:
        return err
    _, why, clean = check_call(args, 10, 200)
    _encodable(clean)
    return why


class _Extent:
    min_lon = min_lat = 0.0
    max_lon = max_lat = 1.0

    def contains(self, lat: float, lon: float) -> bool:
        return False  # every coordinate is out of area: the argument checks run, no map is needed


def _evgeoqa(text: str) -> str | None:
    from rig.benchmarks.evgeoqa.tools import TOOL_NAMES, GeoRoverExecutor
    from rig.decoding.safe import load_json

    args, err = load_json(text)
    if err:
        return err
    kit = GeoRoverExecutor(SimpleNamespace(extent=_Extent(), source=None), 0.5, 0.5)  # type: ignore[arg-type]
    errors = []
    for name in TOOL_NAMES:
        res = kit(name, args)
        _encodable(res.model_dump())
        errors.append(res.error)
    return "; ".join(e for e in errors if e) or None


READERS: dict[str, Callable[[str], str | None]] = {
    "callnavi_json": _callnavi("json"),
    "callnavi_yaml": _callnavi("yaml"),
    "parse_output_json": _parse_output("json_schema"),
    "parse_output_yaml": _parse_output("yaml_schema"),
    "text_tool_calls": _textcalls,
    "thinking_strip": _thinking,
    "toolmode_native": _toolmode("native"),
    "toolmode_json": _toolmode("json"),
    "toolmode_yaml": _toolmode("yaml"),
    "judge_verdict": _judge,
    "urbangeo_answer": _urbangeo,
    "mobilitybench_answer": _mobilitybench,
    "mobilitybench_score": _mobilitybench_score,
    "callnavi_reference": _callnavi_reference,
    "routeeval_call": _routeeval,
    "evgeoqa_tool_args": _evgeoqa,
}

_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)

# The replies named in the issue, and the shapes that were slow (sizes as reported there).
REGRESSIONS: list[str] = [
    '["\\ud83d"]',
    'a: "\\ud83d\\ude00"',
    "a: !!binary //79",
    "&a [*a]",
    "[" * 400 + "]" * 400,
    _LAUGHS,
    "d: 2024-02-30",
    "{a: 2024-02-30}",
    "[" * 1000 + "]" * 1000,
    "```json\n" + "[" * 1000 + "]" * 1000 + "\n```",  # the same inside the fence MobilityBench's reporter writes
    "{" * 600,
    "1" * 4400,
    '{"a": ' + "9" * 5000 + "}",
    '{"estimated_distance": 1' + "0" * 400 + "}",
    '{"estimated_distance": 1e400}',
    "1" * 310,
    "1" * 20000,
    "```json\n" + " " * 30000 + "x",
    "<think>" * 20000,
    "<tool_call>" + " " * 30000 + "x",
    "<reason>" * 20000,
    "answer" + " " * 30000,
    "reason" + " " * 30000,
    "```json" * 10000,
    "5" * 30000 + " x",
    '{"coord": [' + "1" * 400 + ', 2], "distance": ' + "1" * 400 + "}",
    '{"distance": "' + "1" * 5000 + ' km"}',
    '{"name": "f", "arguments": {"x": ' + "1" * 400 + "}}",
    "name: f\narguments:\n  x: 1" + "0" * 400,
    '<tool_call>{"name": "f", "arguments": "{\\"x\\": ' + "9" * 5000 + '}"}</tool_call>',
    "reason:[[" + "9" * 5000 + "]], answer:[[1]]",
    "\x08",
    "a: \x00",  # control characters the YAML reader refuses
]
