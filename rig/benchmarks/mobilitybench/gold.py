"""MobilityBench's gold and anti-gold agents for `rig selftest`, in both frameworks.

Gold plays the episode's ground-truth tool program in order (the sandbox answers each call), each call with a thought
(ReAct) or plan task (Plan-and-Execute) that names exactly the scenario's gold atomic steps in the lexicon's words,
then a final answer built from the ground truth: the scenario as the intent, the GT constraint set, the facts every
answer check reads, and the route index. Anti-gold is well formed (schema-valid calls, a valid final answer) and wrong
on every scored value: another family's scenario, a made-up constraint, one call of a tool outside the program that
the sandbox cannot answer, a plan step that names no atomic step, and an answer that states nothing."""

from __future__ import annotations

from typing import Any

from rig.agents.scripted import Call, Player
from rig.benchmarks.base import GoldUnavailable, MetricRole
from rig.benchmarks.mobilitybench.agents import CONSTRAINTS_SCHEMA, FINAL, PLAN
from rig.benchmarks.mobilitybench.data import Case
from rig.benchmarks.mobilitybench.lexicon import EVAL_TYPE, LEXICONS, lookup_scenario
from rig.benchmarks.mobilitybench.scoring.records import METRICS
from rig.benchmarks.mobilitybench.tools import parse_lonlat
from rig.decoding.validate import validate
from rig.records import ChatRequest

# One phrase per atomic step, each matching its own step pattern and no other (checked in the tests).
STEP_PHRASES: dict[str, dict[str, str]] = {
    "en": {
        "locate": "Look up the coordinates of {what}",
        "nearby search": "search nearby for {what}",
        "weather query": "Query the weather for {what}",
        "traffic query": "check the traffic on {what}",
        "route planning": "Route planning to the destination",
        "driving route": "Driving route to the destination",
        "waypoint route": "Route via the waypoints to the destination",
        "preference route": "Route that follows the user's preferences",
        "time back-calculation": "back-calculate the time",
    },
    "zh": {
        "定位": "查询{what}的坐标",
        "周边搜": "周边搜索{what}",
        "天气查询": "查询{what}的天气",
        "路况查询": "查询{what}的路况",
        "路线规划": "路线规划",
        "驾车路线规划": "驾车规划",
        "途径点路线规划": "途经点规划",
        "有偏好的路线规划": "按偏好规划",
        "时间倒推计算": "倒推出发时间",
    },
}
NOTHING = {"en": "Say hello.", "zh": "打个招呼。"}
_AND = {"en": " and ", "zh": "，"}
ANTI_ANSWER = "No idea."
# A scenario of another family whose reference label shares few characters with the gold's (ID 0 in both modes).
ANTI_INTENT = ("Weather Query", "Point-to-Point Planning")
ANTI_PLACE = "Atlantis"
_LOCATORS = ("query_poi", "reverse_geocoding")


def _unavailable(case: Case, where: str, field: str) -> GoldUnavailable:
    return GoldUnavailable(f"{where}: episode {case.id!r}.{field}")


def _lang(case: Case) -> str:
    return case.truth.lang if case.truth.lang in STEP_PHRASES else "en"


def _gold_steps(case: Case, where: str) -> tuple[str, ...]:
    steps = lookup_scenario(LEXICONS[_lang(case)].gold_steps, case.scenario)
    if not steps:
        raise _unavailable(case, where, f"scenario: {case.scenario!r} has no gold atomic steps")
    return steps


def _args(call: dict[str, Any]) -> dict[str, Any]:
    args = call.get("arguments")
    return args if isinstance(args, dict) else {}


def _subject(args: dict[str, Any]) -> str:
    for key in ("keywords", "name", "city"):
        if isinstance(args.get(key), str) and args[key]:
            return str(args[key])
    return "the user's location"


def step_texts(case: Case, where: str) -> list[str]:
    """The thought (ReAct) or plan task (Plan-and-Execute) of each GT call: the atomic steps it performs, each gold
    step named once. Lookups locate; the program's main call takes the scenario's other steps (and locating too when
    the program has no lookup)."""
    program = case.truth.tool_list
    if not program:
        raise _unavailable(case, where, "tool_list: no ground-truth calls")
    phrases = STEP_PHRASES[_lang(case)]
    gold = list(_gold_steps(case, where))
    locate, rest = gold[0] if gold[0] in ("locate", "定位") else None, [g for g in gold if g not in ("locate", "定位")]
    lookups = [i for i, c in enumerate(program) if c.get("name") in _LOCATORS]
    main = next((i for i in reversed(range(len(program))) if i not in lookups), len(program) - 1)
    out = []
    for i, call in enumerate(program):
        what = _subject(_args(call))
        parts = []
        if locate and (i in lookups or (not lookups and i == main)):
            parts.append(phrases[locate].format(what=what))
        if i == main:
            parts += [phrases[g].format(what=what) for g in rest]
        out.append(_AND[_lang(case)].join(parts) if parts else phrases[locate or gold[0]].format(what=what))
    return out


def gold_constraints(case: Case, where: str) -> dict[str, Any]:
    """The GT constraint set as the final answer's object: each item by its first spelling the schema admits."""
    props = CONSTRAINTS_SCHEMA["properties"]
    out: dict[str, Any] = {}
    for n, item in enumerate(case.truth.constraints or []):
        schema = props.get(item.slot)
        if schema is None:
            raise _unavailable(case, where, f"constraints[{n}].slot: {item.slot!r} is no constraint the agent states")
        one = schema["items"] if schema.get("type") == "array" else schema
        value = next((v for v in item.values if not validate(v, one)), None)
        if value is None:
            raise _unavailable(case, where, f"constraints[{n}].values: none fits the {item.slot} schema")
        if schema.get("type") == "array":
            out.setdefault(item.slot, []).append(value)
        elif item.slot in out:
            raise _unavailable(case, where, f"constraints[{n}].slot: a second {item.slot!r}, which takes one value")
        else:
            out[item.slot] = value
    return out


def gold_answer(case: Case) -> str:
    """A reply that states what every answer check of the episode reads (paper FPR and the reference's rules)."""
    t, ch, g = case.truth, case.truth.checks, case.truth.slots
    parts: list[str] = []
    route = g.get("route_ans")
    route = route if isinstance(route, dict) else {}
    dist = ch.distance_m if ch and ch.distance_m is not None else route.get("distance_m")
    dur = ch.duration_s if ch and ch.duration_s is not None else route.get("duration_s")
    zh = t.lang == "zh"  # the reference's route keywords on Chinese data are Chinese (公里, 分钟, 路线)
    if isinstance(dist, (int, float)):
        parts.append(
            f"路线全程约{dist / 1000:.1f}公里。" if zh else f"The route is {dist:.0f} m ({dist / 1000:.1f} km) long."
        )
    if isinstance(dur, (int, float)):
        parts.append(f"耗时约{round(dur / 60)}分钟。" if zh else f"The route takes about {round(dur / 60)} minutes.")
    if ch and ch.clock:
        parts.append(f"The time is {ch.clock}.")
    for group in ch.facts if ch else []:
        parts.append(group[0] + ".")
    if ch and ch.places:
        parts.append(f"{ch.places[0]}.")
    if ch and ch.coord:
        parts.append(f"Coordinates: {ch.coord['lon']:.6f},{ch.coord['lat']:.6f}.")
    if ch and ch.similar:
        parts.append(ch.similar)
    if ch and ch.traffic:
        parts.append(f"Traffic is {ch.traffic}.")
    poi = g.get("poi_result")
    if isinstance(poi, dict) and isinstance(poi.get("data"), dict) and poi["data"].get("name"):
        parts.append(f"{poi['data']['name']}.")
    if g.get("formatted_address"):
        parts.append(f"The address is {g['formatted_address']}.")
    if g.get("weather_description"):
        parts.append(str(g["weather_description"]))
    ans = g.get("ans")
    info = ans.get("trafficinfo") if isinstance(ans, dict) else None
    if isinstance(info, dict) and info.get("description"):
        parts.append(str(info["description"]))
    near = g.get("near_poi_ans")
    pois = near.get("data", {}).get("pois") if isinstance(near, dict) else None
    if isinstance(pois, list) and pois and isinstance(pois[0], dict) and pois[0].get("name"):
        parts.append(f"Nearby: {pois[0]['name']}.")
    if not parts:
        parts.append(f"Done: {t.scenario}.")
    return " ".join(parts)[:1200]


def gold_route_index(case: Case) -> int | None:
    ch = case.truth.checks
    if ch is not None and ch.route_index is not None:
        return ch.route_index
    return 0 if EVAL_TYPE.get(case.scenario) in ("route", "route_custom") else None


def _final(answer: str, route_index: int | None, extra: dict[str, Any]) -> dict[str, Any]:
    out = {"answer": answer, **extra}
    if route_index is not None:
        out["route_index"] = route_index
    return out


def _plan_steps(case: Case) -> list[list[int]]:
    """GT calls grouped into sequential plan steps of parallel tasks (at most three): a call that uses a coordinate
    other than the user's own waits for the step after every earlier call (it needs their answers)."""
    user = parse_lonlat(str(case.context.get("user_current_location", "")))
    level: list[int] = []
    for call in case.truth.tool_list:
        points = [p for p in map(parse_lonlat, _strings(_args(call))) if p is not None]
        waits = call.get("name") not in _LOCATORS and any(p != user for p in points)
        level.append(1 + max(level) if waits and level else 0)
    out: list[list[int]] = []
    for lv in sorted(set(level)):
        same = [i for i, x in enumerate(level) if x == lv]
        out += [same[k : k + 3] for k in range(0, len(same), 3)]
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def _tools(request: ChatRequest) -> set[str]:
    """The tools the request offers: natively, as the call names its constraint admits (json / yaml), or (prompt
    mode) the stage tools its system prompt describes."""
    if request.tools:
        return {t.name for t in request.tools}
    if request.constraint is None:
        system = " ".join(m.content for m in request.messages if m.role == "system")
        return {n for n in (PLAN, FINAL) if n in system}
    schema = request.constraint.schema_
    options = schema.get("anyOf", [schema]) if isinstance(schema, dict) else []
    return {n for o in options for n in o.get("properties", {}).get("name", {}).get("enum", [])}


def _task(request: ChatRequest) -> str:
    for m in reversed(request.messages):
        if m.role == "user" and m.content.startswith("Task: "):
            return m.content[len("Task: ") :]
    return ""


def _turns(request: ChatRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def gold(case: Case, framework: str, where: str) -> Player:
    texts = step_texts(case, where)
    program = [(str(c.get("name")), _args(c)) for c in case.truth.tool_list]
    constraints = gold_constraints(case, where)
    answer, index = gold_answer(case), gold_route_index(case)
    if framework == "react":
        final = _final(answer, index, {"intent": case.scenario, "constraints": constraints})

        def react(request: ChatRequest) -> Call:
            n = _turns(request)
            if n < len(program):
                return Call(program[n][0], program[n][1], thought=texts[n] + ".")
            return Call(FINAL, final, thought="I have what the user asked for.")

        return react
    steps = _plan_steps(case)
    task_of = {i: f"{texts[i]} (task {i + 1})" for i in range(len(program))}  # numbered: each task text unique
    tasks = {t: i for i, t in task_of.items()}
    slots = [str(v) for v in case.truth.slots.values() if isinstance(v, (str, int, float)) and v]
    plan = {
        "thinking": (f"The user asks: {case.query} Key facts: " + ", ".join(slots))[:600],
        "intent": case.scenario,
        "constraints": constraints,
        "steps": [[task_of[i] for i in s] for s in steps],
    }

    def plan_execute(request: ChatRequest) -> Call:
        names = _tools(request)
        if PLAN in names:
            return Call(PLAN, plan)
        if FINAL in names:
            return Call(FINAL, _final(answer, index, {}))
        i = tasks.get(_task(request), 0)
        return Call(program[i][0], program[i][1])

    return plan_execute


def anti_gold(case: Case, framework: str, where: str) -> Player:
    lang = _lang(case)
    gt = {str(c.get("name")) for c in case.truth.tool_list}
    if "weather_query" not in gt:
        wrong = Call("weather_query", {"city": ANTI_PLACE})
    else:
        wrong = Call("traffic_status", {"name": ANTI_PLACE, "city": ANTI_PLACE})
    intent = ANTI_INTENT[1] if case.scenario == ANTI_INTENT[0] else ANTI_INTENT[0]
    constraints = {"city": ANTI_PLACE}
    if framework == "react":
        final = _final(ANTI_ANSWER, None, {"intent": intent, "constraints": constraints})

        def react(request: ChatRequest) -> Call:
            if _turns(request) == 0:
                return Call(wrong.name, wrong.arguments, thought=NOTHING[lang])
            return Call(FINAL, final, thought=NOTHING[lang])

        return react
    plan = {"thinking": NOTHING[lang], "intent": intent, "constraints": constraints, "steps": [[NOTHING[lang]]]}

    def plan_execute(request: ChatRequest) -> Call:
        names = _tools(request)
        if PLAN in names:
            return Call(PLAN, plan)
        if FINAL in names:
            return Call(FINAL, _final(ANTI_ANSWER, None, {}))
        return wrong

    return plan_execute


def metrics(options: Any) -> dict[str, MetricRole]:
    """Both metric modes' keys (every run stores both): schema compliance is a form in paper mode (any valid call),
    a score in reference mode (a call the GT program lacks is not paired); IT and OT are counts, not judged."""
    roles: dict[str, MetricRole] = {m: "score" for m in METRICS if m not in ("IT", "OT")}
    out = {f"{mode}:{m}": role for mode in ("paper", "reference") for m, role in roles.items()}
    out["paper:SC"] = "form"
    return out


def caps(options: Any) -> dict[str, str]:
    out = {
        "reference:IE": "reference IE is 1 when the scenario has no checkable slot (POI, Geolocation: the "
        "reference's slots there are never in its GT dict), so a wrong agent scores 1 on those episodes"
    }
    if options.framework == "react":
        out["paper:DEC_P"] = (
            "under the json / yaml tool modes a ReAct reply is its call alone, so its steps are its tool actions: gold "
            "atomic steps no tool performs (locating a road or the user, back-calculating a time) stay uncovered"
        )
    if options.framework == "plan":
        out["reference:TS_R"] = (
            "the reference captures Plan-and-Execute calls cumulatively (each worker record repeats the calls of "
            "earlier plan steps), so a plan of more than one step counts its own earlier calls as redundant"
        )
    return out
