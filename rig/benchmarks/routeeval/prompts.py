"""The one tool and the messages, as the paper defines them (sec. 3.1-3.2).

The parameters keep the paper's shape: estimated_distance (miles), route_type (loop | out-and-back |
point-to-point), waypoints [{address, description}]. The bounds (at least 2 and at most 12 waypoints, capped
string lengths) are ours: they let a grammar stop a weak model from looping inside a constrained call until
max_tokens, and a route needs two places.
"""

from __future__ import annotations

from typing import Any, Literal

from rig.agents.toolkit import Toolkit, tool
from rig.records import Message, ToolSpec

TOOL_NAME = "generate_running_route"
SYSTEM_PROMPT = "You are a helpful assistant that generates running routes using the provided tool."
MAX_WAYPOINTS = 12
ADDRESS_MAX = 120
DESCRIPTION_MAX = 120

_WAYPOINT = {
    "type": "object",
    "properties": {
        "address": {
            "type": "string",
            "minLength": 1,
            "maxLength": ADDRESS_MAX,
            "description": "Address or name of the place",
        },
        "description": {
            "type": "string",
            "maxLength": DESCRIPTION_MAX,
            "description": "What the runner finds or does here",
        },
    },
    "required": ["address", "description"],
    "additionalProperties": False,
}


class RouteTools(Toolkit):
    """The one tool. Its call is the answer: the benchmark measures the route on the map afterwards."""

    @tool(TOOL_NAME, waypoints={"description": ..., "minItems": 2, "maxItems": MAX_WAYPOINTS, "items": _WAYPOINT})
    def generate_running_route(
        self,
        estimated_distance: float,
        route_type: Literal["loop", "out-and-back", "point-to-point"],
        waypoints: list[dict[str, str]],
    ) -> dict[str, Any]:
        """Generate a running route through waypoints; the route is measured on a walking map.

        Args:
            estimated_distance: Target distance in miles
            route_type: Type of route
            waypoints: Ordered locations the route passes through
        """
        return {"estimated_distance": estimated_distance, "route_type": route_type, "waypoints": waypoints}


TOOL: ToolSpec = RouteTools.tool_specs()[0]


def format_miles(miles: float) -> str:
    """5.0 -> '5', 6.2 -> '6.2', 13.1 -> '13.1' (the number as a person writes it)."""
    return f"{miles:g}"


def user_text(prompt: str, target_miles: float) -> str:
    """The paper's user turn: the prompt, then ' Target distance: X miles'."""
    return f"{prompt.rstrip()} Target distance: {format_miles(target_miles)} miles"


def messages(prompt: str, target_miles: float) -> list[Message]:
    return [
        Message(role="system", content=SYSTEM_PROMPT),
        Message(role="user", content=user_text(prompt, target_miles)),
    ]
