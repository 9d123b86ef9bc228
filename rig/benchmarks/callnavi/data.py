"""Load the upstream CallNavi layout unchanged: Questions/<domain>.json and APIs/<domain>.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from rig.benchmarks.base import DataError, read_json

# The upstream scripts' domain order; results are reported in it.
DOMAINS = (
    "bank",
    "shopping",
    "logistics",
    "aviation",
    "hospital",
    "gov",
    "hr",
    "hotel",
    "insurance",
    "telecommunications",
)
DIFFICULTIES = ("easy", "medium", "hard")
TASKS = ("routing", "params")  # per question: choose the APIs, then fill their parameters


class Api(BaseModel):
    name: str
    description: str = ""
    parameters: Any = Field(default_factory=dict)  # dict of name -> type, or (telecom) a list of names
    returnParameter: Any = ""


class Question(BaseModel):
    id: str
    domain: str
    text: str
    apis: list[str]
    parameters: list[Any]
    difficulty: str
    gold_error: str | None = None  # why the ground truth is unusable (read leniently, for the self-test), else None


class Domain(BaseModel):
    name: str
    apis: list[Api]
    questions: list[Question]


def _question(path: Path, i: int, raw: Any, domain: str, strict: bool = True) -> Question:
    where = f"{path}: record [{i}]"
    if not isinstance(raw, dict):
        raise DataError(f"{where}: expected an object")
    qid = raw.get("id")
    if not isinstance(qid, str) or not qid:
        raise DataError(f"{where}.id: missing or not a string")
    where = f"{path}: record {qid!r}"
    q = raw.get("question")
    if not (isinstance(q, list) and q and isinstance(q[0], dict) and isinstance(q[0].get("content"), str)):
        raise DataError(f"{where}.question: expected a list of {{role, content}} messages")
    apis, params, gold_error = _ground_truth(raw.get("ground_truth"), where)
    if gold_error is not None and strict:
        raise DataError(gold_error)
    diff = raw.get("difficulty")
    if diff not in DIFFICULTIES:
        raise DataError(f"{where}.difficulty: {diff!r} is not one of {', '.join(DIFFICULTIES)}")
    return Question(
        id=qid,
        domain=domain,
        text=q[0]["content"],
        apis=apis,
        parameters=params,
        difficulty=diff,
        gold_error=gold_error,
    )


def _ground_truth(gt: Any, where: str) -> tuple[list[str], list[Any], str | None]:
    """The ground truth's API names and parameters, or empty ones and why they are unusable."""
    if not isinstance(gt, dict):
        return [], [], f"{where}.ground_truth: missing or not an object"
    apis, params = gt.get("API"), gt.get("parameters")
    if not (isinstance(apis, list) and all(isinstance(a, str) for a in apis)):
        return [], [], f"{where}.ground_truth.API: expected a list of API names"
    if not isinstance(params, list):
        return [], [], f"{where}.ground_truth.parameters: expected a list (one object per call)"
    return apis, params, None


def load_domain(root: Path, domain: str, strict: bool = True) -> Domain:
    """One domain's API list and questions. ``strict``: a question whose ground truth is unusable is a DataError;
    otherwise (the self-test) it is kept with ``gold_error`` saying why."""
    qpath, apath = root / "Questions" / f"{domain}.json", root / "APIs" / f"{domain}.json"
    qraw, araw = read_json(qpath), read_json(apath)
    if not isinstance(qraw, list):
        raise DataError(f"{qpath}: expected a list of question records")
    if not isinstance(araw, dict) or not isinstance(araw.get("api_ports"), list):
        raise DataError(f"{apath}.api_ports: expected an object with a list 'api_ports'")
    apis = []
    for i, a in enumerate(araw["api_ports"]):
        if not isinstance(a, dict) or not isinstance(a.get("name"), str):
            raise DataError(f"{apath}: api_ports[{i}].name: missing or not a string")
        try:
            apis.append(Api.model_validate(a))
        except ValidationError as e:
            field = ".".join(str(x) for x in e.errors()[0]["loc"])
            raise DataError(f"{apath}: api_ports[{i}].{field}: {e.errors()[0]['msg']}") from None
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for i, r in enumerate(qraw):
        q = _question(qpath, i, r, domain, strict)
        if q.id in seen:  # episode ids are question ids: a second one would collide with the first's results
            raise DataError(f"{qpath}: record [{i}].id: duplicate question id {q.id!r} (also record [{seen[q.id]}])")
        seen[q.id] = i
        questions.append(q)
    return Domain(name=domain, apis=apis, questions=questions)


def discover_domains(root: Path) -> list[str]:
    qdir = root / "Questions"
    if not qdir.is_dir():
        raise DataError(f"{qdir}: folder not found (expected the upstream CallNavi layout: Questions/, APIs/)")
    present = {p.stem for p in qdir.glob("*.json")}
    if not present:
        raise DataError(f"{qdir}: no <domain>.json files")
    ordered = [d for d in DOMAINS if d in present]
    return ordered + sorted(present - set(DOMAINS))


def data_files(root: Path, domains: list[str]) -> list[Path]:
    return [root / sub / f"{d}.json" for d in domains for sub in ("Questions", "APIs")]
