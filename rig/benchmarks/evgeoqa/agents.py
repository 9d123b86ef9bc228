"""The GeoRover agent: the framework prompt (our wording of the upstream ``Init_Solve_Problem``, notes C4) and one
episode of the shared tool loop. The tools themselves are offered by the tool-mode axis (rig.agents.toolmode), so the
same prompt runs natively, as prompted JSON, or under a JSON / YAML grammar."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rig.agents.loop import LoopOutcome, run_tool_loop
from rig.benchmarks.evgeoqa.data import Query, Setting
from rig.benchmarks.evgeoqa.tools import (
    CAL_DISTANCE,
    CHANGE_LOCATION,
    FINAL,
    MAX_ANSWER,
    SEARCH_POIS,
    SEARCH_STATIONS,
    GeoRoverExecutor,
    tool_specs,
)
from rig.benchmarks.evgeoqa.world import World
from rig.engines.base import Engine
from rig.records import Message, Sampling

MAX_STEPS = 20  # paper appendix A.4: exploration ends at 20 tool invocations
MAX_FORMAT_ERRORS = 3  # unparseable replies re-prompted before the episode is given up (not published; notes C4)


def system_prompt(setting: Setting) -> str:
    rs, rw = round(setting.search_radius_m), round(setting.walk_radius_m)
    return (
        "You are a geo-spatial assistant for electric-vehicle drivers. Every question asks for a charging station "
        "where the driver can charge the car and, within walking distance of the station, do something else. You "
        "cannot see the map: you explore it with tools, and each tool shows only what is near one coordinate.\n\n"
        "How to work:\n"
        "- Coordinates are always [longitude, latitude].\n"
        "- Call exactly one tool per turn. Read all earlier results before choosing the next call.\n"
        f"- {SEARCH_STATIONS} lists the charging stations within {rs} meters of a coordinate. A station is "
        f"suitable only if {SEARCH_POIS} at the station's own coordinate lists a place for the driver's activity "
        f"(within {rw} meters).\n"
        f"- If no suitable station is known yet, move with {CHANGE_LOCATION} and search again from the new "
        "location; keep exploring until you have found one.\n"
        f"- Prefer suitable stations with the shortest driving distance from the user ({CAL_DISTANCE}).\n"
        f"- Finish with {FINAL}: the station_id of up to {MAX_ANSWER} suitable stations, best first. Use only "
        "station_id values that a tool returned; never invent a station.\n"
        f"Suggested strategy: {SEARCH_STATIONS} at the user's coordinate, then {SEARCH_POIS} at each station "
        f"found, then {CHANGE_LOCATION} when none is suitable, and repeat; compare with {CAL_DISTANCE}; answer."
    )


def user_prompt(q: Query) -> str:
    where = f"User location: {q.location_text}\n" if q.location_text else ""
    return f"Question: {q.question}\n{where}User coordinate [lon, lat]: [{q.lon:.6f}, {q.lat:.6f}]"


def messages_for(q: Query, setting: Setting) -> list[Message]:
    return [Message(role="system", content=system_prompt(setting)), Message(role="user", content=user_prompt(q))]


class AgentRun(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    outcome: LoopOutcome
    executor: GeoRoverExecutor


async def run_georover(
    engine: Engine,
    q: Query,
    world: World,
    *,
    mode: str,
    sampling: Sampling,
    max_steps: int = MAX_STEPS,
    max_format_errors: int = MAX_FORMAT_ERRORS,
) -> AgentRun:
    ex = GeoRoverExecutor(world, q.lat, q.lon)
    out = await run_tool_loop(
        engine,
        messages_for(q, world.setting),
        tool_specs(world.setting),
        ex,
        final_tool=FINAL,
        mode=mode,
        sampling=sampling,
        max_steps=max_steps,
        max_format_errors=max_format_errors,
    )
    return AgentRun(outcome=out, executor=ex)
