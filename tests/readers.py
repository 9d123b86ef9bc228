"""Every reader of model text, as ``name -> read(text)``, for the fuzz tests and scripts/fuzz_readers.py.

``read`` returns None when the text was read as an answer, or the format error a benchmark scores; any exception
escaping it is a bug (it would be recorded as an engine crash)."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
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
    calls, status, _ = found
    _encodable([c.model_dump() for c in calls])
    return None if status == "ok" else status


def _thinking(text: str) -> str | None:
    from rig.engines.thinking import strip_thinking

    assert isinstance(strip_thinking(text), str)
    return None


def _toolmode(mode: str) -> Callable[[str], str | None]:
    def read(text: str) -> str | None:
        from rig.agents.toolmode import extract_calls

        calls, _, why, _ = extract_calls(Generation(request_hash="fuzz", text=text), [_TOOL], mode)
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
    from rig.benchmarks.callnavi.scoring import score_output
    from rig.runfolder.store import sanitize

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
    # tool calls in the forms real models write, made hostile (issue 35): many fences, stray braces before a call,
    # unclosed tags and quotes, deep nesting inside prose, many calls
    '```json\n{"name": "f", "arguments": {}}\n```\n' * 4000,
    "```" * 20000,
    "{" * 50000 + '{"name": "f", "arguments": {"x": 1}}',
    '{"' * 50000 + '{"name": "f", "arguments": {"x": 1}}',
    "call " + "{" * 5000 + "}" * 5000 + " now",
    "<tool_call>{" * 15000,
    "<tools>{" * 20000,
    '<tool_call>{"name": "f", "arguments": {"x": 1}}' * 4000,
    'I call {"name": "f", "arguments": {}} ' * 4000,
    '{"tool_calls": [' + ",".join(['{"name": "f", "arguments": {}}'] * 3000) + "]}",
]


# -- readers of the files a lab feeds rig: `rig rescore`'s prediction files and the benchmarks' dataset loaders --
# ``read`` returns None when the text was read, or the bad-input message (RescoreError / DataError: exit 2 naming
# file and field); any other exception is a bug (a traceback). The text goes in as a whole file and into each field.

_TMP: list[Path] = []


def _tmp() -> Path:
    if not _TMP:  # made on first use, not at import; removed when the process ends
        _TMP.append(Path(tempfile.mkdtemp(prefix="rig-fuzz-")))
        atexit.register(shutil.rmtree, _TMP[0], True)
    return _TMP[0]


def _value(text: str) -> Any:
    """The text as the JSON value a file would hold (as rescore's loader would accept it), else the text itself."""
    from rig.benchmarks.base import nesting_error

    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return text if nesting_error(value) else value


def _bad_input(errors: list[str]) -> str | None:
    return "; ".join(e[:80] for e in errors) or None


def _rescore_file(text: str) -> str | None:
    from rig.benchmarks.mobilitybench.rescore import _prediction
    from rig.benchmarks.predictions import PredictionError, load_predictions

    path = _tmp() / "raw_results.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    errors = []
    try:
        rows = load_predictions(path)
        for i, row in enumerate(rows if isinstance(rows, list) else []):
            if isinstance(row, dict):
                _prediction(f"{path}: record {i}", row)
    except PredictionError as e:
        errors.append(str(e))
    return _bad_input(errors)


def _mobility_record(v: Any, text: str) -> list[dict[str, Any]]:
    call = {"id": "1", "name": "query_poi", "args": {"keywords": "x"}}
    base = {"case_id": "case_1", "planner_output": {"intent": "x", "steps": [["a"]]}, "reporter_output": "ok"}
    return [
        {**base, "token_usage": {"planner": {"prompt_tokens": v, "completion_tokens": 1}}},
        {**base, "token_usage": {"worker": v}},
        {**base, "token_usage": v},
        {**base, "worker_output": [{"tool_calls": v}]},
        {**base, "worker_output": [{"tool_calls": [call], "tool_results": {"1": text}}]},
        {**base, "worker_output": [{"tool_calls": [call], "tool_results": {"1": v}}]},
        {**base, "worker_output": [{"tool_calls": [{**call, "args": v}]}]},
        {**base, "worker_output": [{"tool_calls": [{**call, "name": v}]}]},
        {**base, "worker_output": v},
        {**base, "planner_output": v},
        {**base, "planner_output": {"intent": v, "steps": v, "constraints": v, "thinking": v}},
        {**base, "reporter_output": v, "error": v},
    ]


def _rescore_mobility(text: str) -> str | None:
    from rig.benchmarks.mobilitybench.rescore import _prediction
    from rig.benchmarks.predictions import PredictionError

    errors = []
    for row in _mobility_record(_value(text), text):
        try:
            pred, _, _, calls = _prediction("raw_results.json: record 0", row)
            # what rescore stores of it is plain JSON (NaN and lone surrogates the store's sanitize cleans, with a
            # reason; it is tested with the store)
            json.dumps([pred.intent, pred.steps, pred.report, [c.model_dump() for c in calls]])
        except PredictionError as e:
            errors.append(str(e))
    return _bad_input(errors)


def _rescore_callnavi_gt(text: str) -> str | None:
    from rig.benchmarks.callnavi.rescore import _check_gt
    from rig.benchmarks.predictions import PredictionError

    errors = []
    for stored in (text, _value(text)):
        try:
            _check_gt("maps_0_para_m.json: record 0", stored, {"API": ["a"], "parameters": [{}]}, "q1")
        except PredictionError as e:
            errors.append(str(e))
    return _bad_input(errors)


_CN_QUESTION = {
    "id": "q1",
    "question": [{"role": "user", "content": "Find Oodi"}],
    "ground_truth": {"API": ["geocode"], "parameters": [{"name": "Oodi"}]},
    "difficulty": "easy",
}
_CN_API = {"name": "geocode", "description": "a place", "parameters": {"name": "string"}, "returnParameter": {}}


def _callnavi_data(text: str) -> str | None:
    """The CallNavi loader and prompt builder over a Questions / APIs pair holding the text whole or in a field."""
    from rig.benchmarks.base import DataError
    from rig.benchmarks.callnavi.benchmark import CallNavi

    v = _value(text)
    variants: list[tuple[Any, Any]] = [(text, None), (None, text)]
    variants += [([{**_CN_QUESTION, k: v}], None) for k in _CN_QUESTION]
    variants += [([{**_CN_QUESTION, "ground_truth": {"API": v, "parameters": v}}], None)]
    variants += [(None, {"api_ports": [{**_CN_API, k: v}]}) for k in _CN_API]
    errors = []
    # the whole-file pair, and one field variant picked by the text's length (each gets its share of the inputs)
    for questions, apis in (variants[len(text) % 2], variants[2 + len(text) % (len(variants) - 2)]):
        root = _tmp() / "callnavi"
        for sub, doc in (("Questions", questions or [_CN_QUESTION]), ("APIs", apis or {"api_ports": [_CN_API]})):
            (root / sub).mkdir(parents=True, exist_ok=True)
            body = doc if isinstance(doc, str) else json.dumps(doc, ensure_ascii=False)
            (root / sub / "maps.json").write_text(body, encoding="utf-8", errors="surrogatepass")
        try:
            episodes = CallNavi(root).episodes()
            _encodable([e.model_dump(mode="json") for e in episodes])
        except DataError as e:
            errors.append(str(e))
    return _bad_input(errors)


_MB_ROW = {
    "query": "颐和园在哪里",
    "context": "{'user_current_location': '116.30,39.98', 'city': '北京市'}",
    "task_scenario": "POI Query",
    "intent_family": "Basic Information Retrieval",
    "tool_list": "[{'name': 'query_poi', 'arguments': {'keywords': '颐和园'}}]",
    "ans_loc": "116.27,39.99",
    "poi_result": "{'status': 1, 'data': {'location': '116.27,39.99', 'name': '颐和园'}}",
    "route_ans": "{'route': {'paths': [{'distance': '1500'}]}}",
    "near_poi_ans": "{'data': {'pois': [{'name': '甲'}]}}",
    "ans": "{'trafficinfo': {'description': '畅通'}}",
    "matched_transit_index": "1",
    "duration": "20分钟",
    "llm_ner_ans": "不要1号线",
    "bus_lines_list": "[['1号线']]",
}
_MB_SCENARIOS = ("POI Query", "Route-Constrained Planning", "Nearby Query", "Traffic Info Query", "Weather Query")


def _mobility_data(text: str) -> str | None:
    """The upstream CSV importer, and both metric modes over what it imports: the text as the whole file and in a
    cell of a row per scenario family, as `bench --data` and `rescore --data` read it."""
    import csv

    from rig.benchmarks.base import DataError
    from rig.benchmarks.mobilitybench import scoring as M
    from rig.benchmarks.mobilitybench.importer import load_upstream
    from rig.benchmarks.mobilitybench.similarity import CharJaccard
    from rig.runfolder.store import sanitize

    clean = text.encode("utf-8", "replace").decode("utf-8")  # a CSV file is UTF-8 text
    # one column (picked by the text's length) holds the text, in a row of each scenario family
    col = list(_MB_ROW)[len(text) % len(_MB_ROW)]
    rows = [{**_MB_ROW, "task_scenario": sc, col: clean} for sc in _MB_SCENARIOS]
    path = _tmp() / "cases.csv"
    errors = []
    pred = M.Prediction(intent="x", steps=["a"], report="颐和园 116.27,39.99 1.5公里", content="颐和园", delivered=True)
    for body in ("whole", "cells"):
        if body == "whole":
            path.write_text(clean, encoding="utf-8")
        else:
            with path.open("w", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=list(_MB_ROW))
                w.writeheader()
                w.writerows(rows)
        try:
            cases, _ = load_upstream(path)
        except DataError as e:
            errors.append(str(e))
            continue
        for c in cases:
            _encodable(sanitize(c.model_dump(mode="json"), set()))  # as the store cleans lone surrogates
            for mode in M.MODES:
                _encodable(M.score(pred, c.truth, mode, CharJaccard()))
    return _bad_input(errors)


DATA_READERS: dict[str, Callable[[str], str | None]] = {
    "rescore_file": _rescore_file,
    "rescore_mobility_record": _rescore_mobility,
    "rescore_callnavi_gt": _rescore_callnavi_gt,
    "callnavi_data": _callnavi_data,
    "mobilitybench_data": _mobility_data,
}

# Inputs named in issue 30 for these readers.
DATA_REGRESSIONS: list[str] = [
    "NaN",
    "Infinity",
    "-Infinity",
    '"many"',
    "3",
    "{{",
    "{{}}",
    "{{'status': 0}}",
    "{[1]: 2}",
    "}}{{",
    "[" * 100_000,
    "[" * 100_000 + "]" * 100_000,
    "[" * 200 + "]" * 200,
    "(" * 100_000,
    "x" * 100_000,
    "1e999",
    '[{"case_id": "case_1", "token_usage": {"planner": {"prompt_tokens": NaN}}}]',
    '[{"case_id": "case_1", "token_usage": {"planner": "100 tokens"}}]',
    '[{"case_id": "case_1", "worker_output": [{"tool_calls": 3}]}]',
]


# -- the bounded reader's users (issue 37): every file rig reads that a user, another process or a crash can damage.
# ``read`` writes the text as the file (whole, and as the value of one field in an otherwise plausible file) and calls
# the reader; None when it was read, else the reader's own named error (exit 2 naming the file); any other exception
# is a bug (a traceback), and so is a read that does not return.


def _file(name: str, text: str) -> Path:
    path = _tmp() / "files" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def _bodies(text: str, skeleton: dict[str, Any], fields: tuple[str, ...]) -> list[str]:
    """The text as the whole file, and its JSON value (or the text) in one field of ``skeleton`` (picked by length)."""
    field = fields[len(text) % len(fields)]
    return [text, json.dumps({**skeleton, field: _value(text)}, ensure_ascii=False)]


def _named(read: Callable[[str], None], errors: tuple[type[BaseException], ...]) -> Callable[[str], str | None]:
    def run(text: str) -> str | None:
        try:
            read(text)
        except errors as e:
            return str(e)[:80] or type(e).__name__
        return None

    return run


_MANIFEST = {"format_version": 2, "run_id": "r1", "config_hash": "x", "status": "finished", "started_at": 0.0}


def _run_manifest(text: str) -> None:
    from rig.runfolder.folder import read_manifest
    from rig.runformat import NewerFormatError, RunFileError

    errors = []
    for body in _bodies(text, _MANIFEST, ("format_version", "run_id", "config", "host", "status", "spec")):
        path = _file("run/manifest.json", body)
        try:
            read_manifest(path.parent)
        except (RunFileError, NewerFormatError) as e:
            errors.append(str(e))
    if errors:
        raise RunFileError("; ".join(errors))


def _run_spec(text: str) -> None:
    from rig.runfolder.spec import SpecError, read_spec

    errors = []
    for body in _bodies(text, {"model": "m", "benchmark": "callnavi"}, ("limit", "max_tokens", "options", "data")):
        try:
            read_spec(_file("spec.json", body))
        except SpecError as e:
            errors.append(str(e))
    if errors:
        raise SpecError("; ".join(errors))


def _load_plan(text: str) -> None:
    from rig.analyses.load.run import _open_plan

    skeleton = {"format_version": 1, "settings": {"bench": {"model": "m"}, "levels": [1, 2]}, "runs": {}}
    for body in _bodies(text, skeleton, ("format_version", "settings", "runs")):
        _file("load-1/plan.json", body)
        _open_plan(_tmp() / "files", "load-1")


def _bundle_manifest(text: str) -> None:
    from rig.bundle.manifest import parse_manifest

    for body in _bodies(text, {"format_version": 2, "bundle_id": "x", "files": []}, ("format_version", "files")):
        parse_manifest(Path("MANIFEST.json"), body.encode("utf-8", "surrogatepass"))


def _registry(text: str) -> None:
    from rig.registry import load_registry

    entry = "models:\n  m:\n    engine: ollama\n    weights: {ollama: 'm:1'}\n    quantization: q4\n"
    load_registry(_file("models.yaml", text))
    value = json.dumps(_value(text), ensure_ascii=False)
    field = ("context_length", "quantization", "sampling", "engine_args")[len(text) % 4]
    load_registry(_file("models.yaml", entry + f"    context_length: 8\n    {field}: {value}\n"))


def _sweep_spec(text: str) -> None:
    from rig.sweep.spec import load_sweep

    load_sweep(_file("sweep.yaml", text))
    value = json.dumps(_value(text), ensure_ascii=False)
    field = ("limit", "repeats", "seed", "max_tokens")[len(text) % 4]
    load_sweep(_file("sweep.yaml", f"models: [gemma3-270m]\nbenchmarks: [callnavi]\n{field}: {value}\n"))


def _divergence_report(text: str) -> None:
    from rig.analyses.divergence.output import read_report

    for body in _bodies(text, {"format_version": 1}, ("format_version", "rows", "variants")):
        read_report(_file("cmp/divergence.json", body).parent)


def _job_state(text: str) -> None:
    from rig.sweep.run import _read_state

    for body in _bodies(text, {"attempts": []}, ("attempts", "status")):
        _read_state(_file("job/job.json", body).parent)


def _public_key(text: str) -> None:
    from rig.bundle.sign import load_public

    load_public(_file("key.pub", text))
    load_public(_file("key.pub", "ssh-ed25519 " + text))


def _benchmark_json(text: str) -> None:
    from rig.benchmarks.base import read_json

    for body in _bodies(text, {"api_ports": []}, ("api_ports", "id")):
        read_json(_file("data/Questions/maps.json", body))


def _evgeoqa_lines(text: str) -> None:
    from rig.benchmarks.evgeoqa.importer import read_lines

    read_lines(_file("data/qa.jsonl", text))
    read_lines(_file("data/qa.jsonl", '{"id": 1}\n' + text))


def _prompt_pack(text: str) -> None:
    from rig.benchmarks.routeeval.data import load_prompt_pack

    for body in _bodies(text, {"name": "p", "prompts": []}, ("name", "prompts", "length_bins")):
        load_prompt_pack(_file("data/pack.yaml", body))


_PACK_INFO = {
    "format_version": 1,
    "source_file": "x.osm.pbf",
    "source_sha256": "0" * 64,
    "built_at": "2026-01-01T00:00:00Z",
    "build_seconds": 1.0,
    "builder": {"rig": "0"},
    "city": None,
    "extent": {"min_lat": 60.0, "min_lon": 24.0, "max_lat": 60.5, "max_lon": 25.0},
    "counts": {"nodes": 1},
}


def _pack_info(text: str) -> None:
    from rig.maps.pack_format import read_info

    for body in _bodies(text, _PACK_INFO, ("format_version", "extent", "counts", "builder", "build_seconds")):
        read_info(_file("pack/pack.json", body).parent)


def _bundle_models_yaml(text: str) -> None:
    """`rig bundle create`'s second read of models.yaml (the entries it copies into the bundle)."""
    from rig.bundle.weights import write_models_yaml

    out = _tmp() / "files" / "bundle-out"
    out.mkdir(parents=True, exist_ok=True)
    entry = "models:\n  m:\n    engine: ollama\n    weights: {ollama: 'm:1'}\n    quantization: q4\n"
    value = json.dumps(_value(text), ensure_ascii=False)
    field = ("context_length", "variants", "sampling", "engine_args")[len(text) % 4]
    for body in (text, entry + f"    {field}: {value}\n"):
        reg = SimpleNamespace(path=str(_file("bundle-src/models.yaml", body)), defaults={})
        spec = SimpleNamespace(base="m", variant=None, name="m")
        write_models_yaml(reg, [spec], {"m": {"file": "w.gguf"}}, out)


_SECRET = "s3cr3t-pw"


def _tracking_uri(text: str) -> None:
    """`--mlflow` / MLFLOW_TRACKING_URI (not a file, read in the same way): the text as a URI, as an http authority
    and with credentials; what parses reaches an ASCII host and a real port, what is refused names it printably
    without the password."""
    from rig.offline import BadUri, parse_uri

    first: BadUri | None = None
    for uri in (text, "http://" + text, f"http://user:{_SECRET}@" + text):
        try:
            got = parse_uri(uri, "--mlflow")
        except BadUri as e:
            msg = str(e)
            assert msg.startswith("--mlflow ") and msg.isprintable(), msg
            assert _SECRET not in msg or _SECRET in text, msg
            first = first or e
            continue
        assert got.host.isascii() and (got.port is None or 0 < got.port < 65536), (uri, got)
        assert got.scheme in ("http", "https", "file", "sqlite")
    if first is not None:
        raise first


def _allowed_host(text: str) -> None:
    """`--allow-host` / RIG_ALLOW_HOSTS entries: the text, and the text as a port of a plain host."""
    from rig.offline import AllowListError, parse_allowed

    first: AllowListError | None = None
    for entry in (text, "lab:" + text):
        try:
            host, port = parse_allowed(entry, "--allow-host")
        except AllowListError as e:
            assert str(e).startswith("--allow-host ") and str(e).isprintable(), str(e)
            first = first or e
            continue
        assert host.isascii() and 0 < port < 65536, (entry, host, port)
    if first is not None:
        raise first


def _compare_plan(text: str) -> None:
    """A comparison folder's plan.json as `rig compare --resume` reads it."""
    from rig.analyses.compare_run import read_plan

    skeleton = {"format_version": 1, "cells": []}
    for body in _bodies(text, skeleton, ("cells", "format_version")):
        read_plan(_file("cmp-1/plan.json", body).parent)


def _entry_points(text: str) -> None:
    """A distribution's entry_points.txt (a neighbour's or a plugin's), as the text and as lines of rig's groups:
    discovery never raises; each plugin found names a well-formed target, each line left out is a
    warning naming the distribution."""
    import re
    import sys

    from rig import plugins

    site = _tmp() / "files" / "entry-points-site"
    info = site / "rig_fuzz_dist-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rig-fuzz-dist\nVersion: 0.1\n")
    saved = sys.path[:]
    sys.path[:] = [str(site)]  # this distribution alone: discovery reads every one on the path
    try:
        for body in (text, f"[{plugins.ENGINE_GROUP}]\n{text}", f"[{plugins.BENCHMARK_GROUP}]\nx = {text}"):
            (info / "entry_points.txt").write_bytes(body.encode("utf-8", "surrogatepass"))
            for group in (plugins.ENGINE_GROUP, plugins.BENCHMARK_GROUP):
                plugins.discover.cache_clear()
                found = plugins.discover(group, ())
                assert all(re.fullmatch(r"[\w.]+(:[\w.]+)?", p.target) for p in found.plugins.values()), found
                assert all("rig-fuzz-dist 0.1" in w for w in found.problems), found.problems
    finally:
        sys.path[:] = saved
        plugins.discover.cache_clear()


def _errors() -> dict[str, tuple[type[BaseException], ...]]:
    from rig.analyses.load.run import BenchError
    from rig.benchmarks.base import DataError
    from rig.benchmarks.evgeoqa.importer import ImportError_
    from rig.bundle.manifest import BundleError
    from rig.inputs import InputError
    from rig.offline import AllowListError, BadUri
    from rig.registry import RegistryError
    from rig.runfolder.spec import SpecError
    from rig.runformat import NewerFormatError, RunFileError
    from rig.sweep.spec import SweepError

    return {
        "bench": (BenchError,),
        "bundle": (BundleError,),
        "registry": (RegistryError,),
        "sweep": (SweepError,),
        "run": (RunFileError, NewerFormatError),
        "spec": (SpecError,),
        "input": (InputError, NewerFormatError),
        "data": (DataError,),
        "evgeoqa": (ImportError_,),
        "pack": (ValueError,),  # an InputError, or a pack format this rig does not read
        "uri": (BadUri,),
        "host": (AllowListError,),
    }


def _lazy(read: Callable[[str], None], kind: str) -> Callable[[str], str | None]:
    """``_named`` with the error classes imported on first use (no work at import)."""

    def run(text: str) -> str | None:
        return _named(read, _errors()[kind])(text)

    return run


FILE_READERS: dict[str, Callable[[str], str | None]] = {
    "run_manifest": _lazy(_run_manifest, "run"),
    "run_spec": _lazy(_run_spec, "spec"),
    "load_plan": _lazy(_load_plan, "bench"),
    "bundle_manifest": _lazy(_bundle_manifest, "bundle"),
    "models_yaml": _lazy(_registry, "registry"),
    "sweep_spec": _lazy(_sweep_spec, "sweep"),
    "divergence_report": _lazy(_divergence_report, "input"),
    "sweep_job_state": _lazy(_job_state, "input"),
    "public_key": _lazy(_public_key, "bundle"),
    "benchmark_json": _lazy(_benchmark_json, "data"),
    "evgeoqa_lines": _lazy(_evgeoqa_lines, "evgeoqa"),
    "routeeval_prompt_pack": _lazy(_prompt_pack, "data"),
    "map_pack_info": _lazy(_pack_info, "pack"),
    "bundle_models_yaml": _lazy(_bundle_models_yaml, "bundle"),
    "compare_plan": _lazy(_compare_plan, "input"),
    "tracking_uri": _lazy(_tracking_uri, "uri"),
    "allowed_host": _lazy(_allowed_host, "host"),
    "entry_points": _named(_entry_points, ()),
}

# Inputs named in issue 37 for these readers, and the shapes of issue 30 that apply to any file.
FILE_REGRESSIONS: list[str] = [
    *DATA_REGRESSIONS,
    '{"format_version": "99"}',
    '{"format_version": true}',
    '{"format_version": 1e400}',
    '{"limit": true, "max_tokens": 1e12}',
    '{"runs": {"x": "../../escape"}}',
    '{"runs": {"1": "\\u001b[2J"}}',
    "[" * 100_000,
    '{"a": ' * 100_000,
    "models:\n  a/b:\n    engine: ollama\n",
    "models:\n  ../escape: {}\n",
    "ssh-dss AAAAB3NzaC1kc3MAAACBAP1",
    "\x00" * 1000,
]


# -- valid files read back equal (issue 37): for a reader above, a hypothesis strategy of valid records (or values)
# and the round trip through the file the way rig writes it; ``check(value)`` returns what the reader read back,
# which the test compares with ``value``. Imports are lazy (no work at import).


def _valid() -> dict[str, tuple[Any, Callable[[Any], Any]]]:
    from hypothesis import strategies as st

    from rig.benchmarks.base import read_json
    from rig.benchmarks.evgeoqa.importer import read_lines
    from rig.maps.pack_format import read_info
    from rig.maps.records import Extent, PackInfo
    from rig.records import write_record
    from rig.registry import load_registry
    from rig.runfolder.spec import RunSpec, read_spec, write_spec

    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # JSON text: no lone surrogate
    # YAML text: no control character either (the bounded YAML loader refuses them, as YAML does outside escapes)
    yaml_text = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Cf")), max_size=40)
    finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
    json_value = st.recursive(
        st.none() | st.booleans() | st.integers(-(10**15), 10**15) | finite | text,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
        max_leaves=25,
    )
    name = st.from_regex(r"[a-z][a-z0-9._-]{0,30}", fullmatch=True).filter(lambda n: ".." not in n)

    def benchmark_json(v: Any) -> Any:
        return read_json(_file("valid/data.json", json.dumps(v, ensure_ascii=False)))

    def evgeoqa_lines(rows: list[dict[str, Any]]) -> Any:
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        return [r for _, r in read_lines(_file("valid/qa.jsonl", body))]

    pack_info = st.builds(
        PackInfo,
        format_version=st.just(1),
        source_file=text,
        source_sha256=st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
        built_at=text,
        build_seconds=finite,
        builder=st.dictionaries(text, text, max_size=3),
        city=st.none() | text,
        extent=st.builds(Extent, min_lat=finite, min_lon=finite, max_lat=finite, max_lon=finite),
        counts=st.dictionaries(text, st.integers(0, 10**12), max_size=3),
    )

    def map_pack_info(info: Any) -> Any:
        folder = _tmp() / "files" / "valid-pack"
        folder.mkdir(parents=True, exist_ok=True)
        write_record(folder / "pack.json", info)
        return read_info(folder)

    run_spec = st.builds(
        RunSpec,
        model=name,
        benchmark=st.sampled_from(["callnavi", "routeeval", "mobilitybench"]),
        limit=st.none() | st.integers(1, 10**9),
        max_tokens=st.none() | st.integers(1, 32768),
        seed=st.none() | st.integers(0, 2**31),
        temperature=st.none() | st.floats(0, 2),
        repeats=st.integers(1, 10),
        options=st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), json_value, max_size=3),
        concurrency=st.integers(1, 1024),
    )

    def run_spec_file(spec: Any) -> Any:
        return read_spec(write_spec(_tmp() / "files" / "valid-spec.json", spec))

    entry = st.fixed_dictionaries(
        {
            "engine": st.just("ollama"),
            "weights": st.fixed_dictionaries({"ollama": yaml_text.filter(str.strip)}),
            "quantization": yaml_text.filter(str.strip),
            "context_length": st.integers(1, 10**7),
            "description": yaml_text,
        }
    )

    def models_yaml(models: dict[str, Any]) -> Any:
        import yaml

        reg = load_registry(_file("valid/models.yaml", yaml.safe_dump({"models": models}, allow_unicode=True)))
        return {
            n: reg.get(n).model_dump(mode="json", include={"engine", "quantization", "context_length", "description"})
            | {"weights": {"ollama": reg.get(n).weights.ollama}}
            for n in reg.models
        }

    return {
        "benchmark_json": (json_value, benchmark_json),
        "evgeoqa_lines": (st.lists(st.dictionaries(text, json_value, max_size=4), max_size=5), evgeoqa_lines),
        "map_pack_info": (pack_info, map_pack_info),
        "run_spec": (run_spec, run_spec_file),
        "models_yaml": (st.dictionaries(name, entry, min_size=1, max_size=3), models_yaml),
    }


VALID_READERS = ("benchmark_json", "evgeoqa_lines", "map_pack_info", "run_spec", "models_yaml")


def valid_reader(name: str) -> tuple[Any, Callable[[Any], Any]]:
    """The strategy of valid values for FILE_READERS[name] and its round trip (write as rig does, read back)."""
    return _valid()[name]
