"""CallNavi's gold and anti-gold answers for `rig selftest`: the ground truth written in the run's format (and, under
a constraint, in the grammar's key order), and a well-formed answer whose API list is wrong."""

from __future__ import annotations

from typing import Any

from rig.agents.scripted import Answer, Player
from rig.benchmarks.base import GoldUnavailable, MetricRole
from rig.decoding.constraint import Constraint
from rig.decoding.validate import validate
from rig.records import Episode


def _answer(episode: Episode, apis: list[str], fmt: str) -> Answer:
    if episode.tags["task"] == "routing":
        return Answer(apis, "yaml" if fmt == "yaml" else "json")
    return Answer({"API": apis, "parameters": episode.ground_truth["parameters"]}, "yaml" if fmt == "yaml" else "json")


def _gold_apis(episode: Episode, where: str) -> list[str]:
    gt = episode.ground_truth
    if gt.get("gold_error"):
        raise GoldUnavailable(gt["gold_error"])
    apis = gt.get("API")
    if not isinstance(apis, list) or not apis or not all(isinstance(a, str) and a for a in apis):
        raise GoldUnavailable(f"{where}: record {episode.tags.get('question')!r}.ground_truth.API: no API names")
    if episode.tags["task"] == "params" and not isinstance(gt.get("parameters"), list):
        raise GoldUnavailable(f"{where}: record {episode.tags.get('question')!r}.ground_truth.parameters: not a list")
    return apis


def gold(episode: Episode, fmt: str, where: str) -> Player:
    answer = _answer(episode, _gold_apis(episode, where), fmt)
    return lambda _request: answer


def anti_gold(episode: Episode, fmt: str, declared: list[str], where: str) -> Player:
    """The gold answer with its first API replaced by another declared one (one not in the gold list): well formed,
    and wrong on routing, order, structure and AST alike."""
    apis = _gold_apis(episode, where)
    other = next((n for n in declared if n not in apis), apis[0] + "Other")
    answer = _answer(episode, [other, *apis[1:]], fmt)
    return lambda _request: answer


def admitted_tag(episode: Episode, constraint: Constraint | None) -> dict[str, str]:
    """Under a grammar, whether the episode's gold answer lies inside it (``gold_admitted``: yes / no), so the report
    can state the ceiling the grammar's bounds put on the scores of a data set whose answers exceed them."""
    if constraint is None or constraint.schema_ is None or episode.ground_truth.get("gold_error"):
        return {}
    gt = episode.ground_truth
    value = (
        gt.get("API")
        if episode.tags["task"] == "routing"
        else {"API": gt.get("API"), "parameters": gt.get("parameters")}
    )
    return {"gold_admitted": "no" if validate(value, constraint.schema_) else "yes"}


def metrics(options: Any) -> dict[str, MetricRole]:
    """Each scored mode's keys (``paper:ast``; the main mode's plain keys are copies of its own)."""
    keys: dict[str, MetricRole] = {"routing": "score", "syntax": "form", "structure": "score", "ast": "score"}
    keys["order"] = "score"
    modes = ("paper", "reference") if options.format == "json" else ("paper",)
    return {f"{m}:{k}": role for m in modes for k, role in keys.items()}
