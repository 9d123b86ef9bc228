"""Toolkits: schemas derived from typed methods, equal (key order included) to the hand-written ones they replaced."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

from rig.agents.toolkit import Toolkit, tool
from rig.benchmarks.evgeoqa.data import Setting
from rig.benchmarks.evgeoqa.tools import tool_specs
from rig.benchmarks.mobilitybench.tools import agent_tools, schemas
from rig.benchmarks.routeeval.prompts import TOOL
from rig.maps.tools import MapTools
from rig.records import EpisodeResult, ToolCall

# Captured from the hand-written schemas before they became toolkits; prompts print them, so order matters too.
FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "tool_schemas.json").read_text())


def dumped(specs: list[Any]) -> str:
    return json.dumps([s if isinstance(s, dict) else s.model_dump() for s in specs], ensure_ascii=False)


@pytest.mark.parametrize(
    "key, specs",
    [
        ("maps", lambda: MapTools().specs()),
        ("evgeoqa_paper", lambda: tool_specs(Setting.paper())),
        ("evgeoqa_scaled", lambda: tool_specs(Setting.scaled(1944.6))),
        ("mobilitybench_en", lambda: agent_tools("en")),
        ("mobilitybench_zh", lambda: agent_tools("zh")),
        ("routeeval", lambda: [TOOL]),
    ],
)
def test_generated_schemas_equal_the_hand_written_ones(key: str, specs: Any) -> None:
    assert dumped(specs()) == dumped(FIXTURE[key])


def test_mobilitybench_schemas_view_matches_its_toolkit() -> None:
    assert [{"name": n, "description": d, "parameters": p} for n, (d, p) in schemas("zh").items()] == FIXTURE[
        "mobilitybench_zh"
    ]


class Kit(Toolkit):
    def __init__(self, unit: str) -> None:
        self.unit = unit

    @tool(
        "Look_Up",
        limit={"minimum": 1},
        kinds={"maxItems": 2, "default": ..., "items": ...},
        near={"description": ..., "items": lambda kit: {"type": "string", "enum": [kit.unit]}},
    )
    def look_up(
        self,
        query: str,
        mode: Literal["a", "b"] = "a",
        limit: int = 5,
        city: str | None = None,
        kinds: Sequence[Literal["x", "y"]] = (),
        near: list[str] | None = None,
        size: float | str = 1,
    ) -> None:
        """Look something up in {kit.unit},
        nearest first.

        Args:
            query: what to look for
            near: places near which
                to look
        """


def test_derivation_rules() -> None:
    (spec,) = Kit("metres").specs()
    assert spec.name == "Look_Up" and spec.description == "Look something up in metres, nearest first."
    assert json.dumps(spec.parameters) == json.dumps(
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "what to look for"},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "limit": {"type": "integer", "minimum": 1, "default": 5},
                "city": {"type": "string"},  # None: optional, no default
                "kinds": {
                    "type": "array",
                    "maxItems": 2,
                    "default": [],
                    "items": {"type": "string", "enum": ["x", "y"]},
                },
                "near": {
                    "type": "array",
                    "description": "places near which to look",
                    "items": {"type": "string", "enum": ["metres"]},
                },
                "size": {"anyOf": [{"type": "number"}, {"type": "string"}], "default": 1},
            },
            "required": ["query"],
            "additionalProperties": False,
        }
    )


def test_toolkit_lookups() -> None:
    kit = Kit("m")
    assert kit.names() == ["Look_Up"] and kit.method("Look_Up") == kit.look_up and kit.method("look_up") is None


def test_decorator_refuses_mistakes() -> None:
    with pytest.raises(TypeError, match="no parameter"):
        tool(qeury={"minLength": 1})(Kit.look_up)

    class Twice(Toolkit):
        @tool("same")
        def one(self) -> None: ...

        @tool("same")
        def two(self) -> None: ...

    with pytest.raises(TypeError, match="declared twice"):
        Twice().specs()
    with pytest.raises(TypeError, match="no JSON-schema type"):

        class Odd(Toolkit):
            @tool()
            def odd(self, x: bytes) -> None: ...

        Odd().specs()


def test_stored_tool_calls_with_source_still_load() -> None:
    """Rows written before ToolCall.meta carry ``source``; it moves into meta ("none" meant no source)."""
    old = {
        "benchmark": "b",
        "episode_id": "e",
        "repeat": 0,
        "tool_calls": [
            {
                "name": "geocode",
                "arguments": {},
                "verdict": "valid",
                "answer": [1],
                "source": "fuzzy",
                "error": None,
                "error_category": None,
                "step": 0,
            },
            {"name": "finish", "arguments": {}, "source": "none"},
        ],
    }
    res = EpisodeResult.model_validate_json(json.dumps(old))
    assert [c.meta for c in res.tool_calls] == [{"source": "fuzzy"}, {}]
    assert "source" not in res.tool_calls[0].model_dump()
    assert ToolCall.model_validate_json(res.tool_calls[0].model_dump_json()) == res.tool_calls[0]
