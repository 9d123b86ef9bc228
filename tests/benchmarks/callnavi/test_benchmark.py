import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from rig.benchmarks.base import DataError
from rig.benchmarks.callnavi import data as D
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.benchmarks.callnavi.parse import parse_answer
from rig.benchmarks.callnavi.prompts import (
    MAX_CALLS,
    MAX_NAME_CHARS,
    MAX_VALUE_CHARS,
    answer_schema,
    build_prompt,
    render_api,
)
from rig.decoding import validate


def test_upstream_layout_loads_unchanged(callnavi_data: Path) -> None:
    b = CallNavi(callnavi_data)
    doms = b.domains()
    assert list(doms) == list(D.DOMAINS)
    qs = [q for d in doms.values() for q in d.questions]
    assert len(qs) == 729
    assert Counter(q.difficulty for q in qs) == {"easy": 456, "medium": 187, "hard": 86}
    assert len(doms["telecommunications"].apis) == 101
    assert len(b.episodes()) == 729 * 2


def test_api_rendering_matches_upstream_shape(callnavi_data: Path) -> None:
    hr = D.load_domain(callnavi_data, "hr")
    txt = render_api(hr.apis[0])
    assert txt.startswith("Function:\ndef getEmployeeInfo({'employeeID': 'string'})")
    assert "employeeID (str)" in txt and "EmployeeName: string" in txt and "'" not in txt.split("Returns:")[1]
    tel = D.load_domain(callnavi_data, "telecommunications")
    assert "def getAccountIdFromNumber('phoneNumber')" in render_api(tel.apis[0])


def test_prompts_share_the_domain_prefix(callnavi_data: Path) -> None:
    eps = [e for e in CallNavi(callnavi_data, {"domains": "hr"}).episodes()]
    a, b = eps[0].messages[0].content, eps[2].messages[0].content
    # strict=False: the prompts differ in length; only their common prefix is compared
    common = (
        len(Path(a).as_posix()) if a == b else next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    )
    assert common > 0.8 * len(a)  # only the instruction tail and question differ
    assert {e.prefix_group for e in eps} == {"hr/json"}


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / "cn"
    (dst / "Questions").mkdir(parents=True)
    (dst / "APIs").mkdir()
    shutil.copy(src / "Questions" / "hr.json", dst / "Questions" / "hr.json")
    shutil.copy(src / "APIs" / "hr.json", dst / "APIs" / "hr.json")
    return dst


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda q: q[3].pop("ground_truth"), "record 'hr004'.ground_truth"),
        (lambda q: q[5].update(difficulty="extreme"), "record 'hr006'.difficulty"),
        (lambda q: q[0]["ground_truth"].update(parameters={"a": 1}), "record 'hr001'.ground_truth.parameters"),
        (lambda q: q[1].update(id=None), "record [1].id"),
    ],
)
def test_corrupt_dataset_names_file_and_field(callnavi_data: Path, tmp_path: Path, mutate, needle: str) -> None:  # type: ignore[no-untyped-def]
    root = _copy(callnavi_data, tmp_path)
    qp = root / "Questions" / "hr.json"
    qs = json.loads(qp.read_text())
    mutate(qs)
    qp.write_text(json.dumps(qs))
    with pytest.raises(DataError) as e:
        CallNavi(root).episodes()
    assert str(qp) in str(e.value) and needle in str(e.value)


def test_truncated_json_file(callnavi_data: Path, tmp_path: Path) -> None:
    root = _copy(callnavi_data, tmp_path)
    ap = root / "APIs" / "hr.json"
    ap.write_text(ap.read_text()[:200])
    with pytest.raises(DataError, match=r"APIs/hr.json: not valid JSON"):
        CallNavi(root).episodes()


def test_duplicate_question_id_is_refused_at_load_naming_file_and_id(callnavi_data: Path, tmp_path: Path) -> None:
    root = _copy(callnavi_data, tmp_path)
    qp = root / "Questions" / "hr.json"
    qs = json.loads(qp.read_text())
    qs[4]["id"] = qs[1]["id"]
    qp.write_text(json.dumps(qs))
    with pytest.raises(DataError, match=rf"{qp}: record \[4\].id: duplicate question id 'hr002'"):
        CallNavi(root).episodes()
    # the same id in two domains: episode ids would collide there too
    qs[4]["id"] = "hr005"
    qp.write_text(json.dumps(qs))
    shutil.copy(qp, root / "Questions" / "bank.json")
    shutil.copy(root / "APIs" / "hr.json", root / "APIs" / "bank.json")
    with pytest.raises(DataError, match=r"Questions/hr.json: question id 'hr001' is also in Questions/bank.json"):
        CallNavi(root).episodes()


def test_nesting_past_the_parsers_depth_is_a_data_error(callnavi_data: Path, tmp_path: Path) -> None:
    root = _copy(callnavi_data, tmp_path)
    qp = root / "Questions" / "hr.json"
    qs = json.loads(qp.read_text())
    qp.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError, match=r"Questions/hr.json: nested past the JSON parser's depth"):
        CallNavi(root).episodes()
    qs[2]["ground_truth"]["parameters"] = json.loads("[" * 500 + "]" * 500)  # parses, then deeper than any data
    qp.write_text(json.dumps(qs))
    with pytest.raises(DataError, match=r"Questions/hr.json: \[2\].ground_truth.parameters.*nested more than 64"):
        CallNavi(root).episodes()


def test_a_number_where_a_description_belongs_names_file_and_field(callnavi_data: Path, tmp_path: Path) -> None:
    root = _copy(callnavi_data, tmp_path)
    ap = root / "APIs" / "hr.json"
    apis = json.loads(ap.read_text())
    apis["api_ports"][1]["description"] = 7
    ap.write_text(json.dumps(apis))
    with pytest.raises(DataError, match=rf"{ap}: api_ports\[1\].description: Input should be a valid string"):
        CallNavi(root).episodes()


def test_yaml_uses_safe_loader_only() -> None:
    value, err = parse_answer("!!python/object/apply:os.system ['echo pwned']", "yaml", dict)
    assert value is None and err.startswith("yaml_error")


def test_answer_schema_ties_calls_to_names_not_to_the_declared_list(callnavi_data: Path) -> None:
    """Gold answers name APIs and arguments the domain's list lacks (aviation's getpassengerName), so the schema
    admits any name up to MAX_NAME_CHARS and any argument keys; what it holds is one argument object per name."""
    hr = D.load_domain(callnavi_data, "hr")
    s = answer_schema(hr.apis, "params")
    assert len(s["anyOf"]) == MAX_CALLS
    assert all(v["required"] == ["API", "parameters"] for v in s["anyOf"])
    assert validate({"API": ["getpassengerName"], "parameters": [{"bookingId": "9876"}]}, s) == []
    assert validate({"API": ["x" * (MAX_NAME_CHARS + 1)], "parameters": []}, s)  # past the name bound
    assert validate({"API": [""], "parameters": []}, s)  # no empty name
    assert validate({"API": ["getEmployeeInfo"], "parameters": [{"employeeID": "E" * (MAX_VALUE_CHARS + 1)}]}, s)
    one = {"API": ["getEmployeeInfo"], "parameters": [{"employeeID": "E1"}]}
    assert validate(one, s) == []
    assert validate({"API": ["getEmployeeInfo"], "parameters": []}, s) == []  # as six dataset answers have it
    assert validate({**one, "parameters": one["parameters"] * 2}, s)  # more argument objects than APIs
    assert validate({**one, "API": ["getEmployeeInfo"] * 2}, s)  # fewer
    assert "Question start\nhi\nQuestion end" in build_prompt(hr.apis, "hi", "params", "yaml")


def test_answer_bounds_fit_every_ground_truth(callnavi_data: Path) -> None:
    """The constrained answer's bounds never exclude a ground-truth answer (see prompts.MAX_CALLS)."""

    def strings(v: object) -> list[str]:
        if isinstance(v, str):
            return [v]
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else []
        return [s for x in items for s in strings(x)]

    questions = [q for d in D.discover_domains(callnavi_data) for q in D.load_domain(callnavi_data, d).questions]
    assert len(questions) == 729
    assert max(len(q.apis) for q in questions) <= MAX_CALLS
    assert all(len(q.parameters) in (0, len(q.apis)) for q in questions)
    assert max(len(s) for q in questions for s in strings(q.parameters)) <= MAX_VALUE_CHARS


@pytest.mark.parametrize(
    ("apis", "primary", "detail"),
    [(["notAnApiOfTheDomain"], "invented_entity", "undeclared API"), (None, "wrong_tool", None)],
)
def test_an_api_the_domain_never_declared_is_an_invented_entity(apis, primary, detail) -> None:  # type: ignore[no-untyped-def]
    """A wrong API list naming an API outside the domain's list is the taxonomy's invented entity; a wrong list of
    declared APIs stays a wrong tool (its reason kept as the detail)."""
    import asyncio

    from rig.benchmarks.base import RunContext
    from rig.records import Sampling
    from tests.fakes import FakeEngine

    bench = CallNavi()
    ep = next(e for e in bench.episodes() if e.tags["task"] == "routing")
    declared = [a.name for a in bench.domains()[ep.tags["domain"]].apis]
    wrong = apis or [next(a for a in declared if a not in ep.ground_truth["API"])]
    engine = FakeEngine(lambda _req: json.dumps(wrong))
    res = asyncio.run(bench.run_episode(ep, engine, RunContext(sampling=Sampling()), 0))
    assert CallNavi.success(res) is False
    cls, why, mapped = CallNavi.failure_class(res)
    assert (cls, mapped) == (primary, True) and why == (detail or "routing")
