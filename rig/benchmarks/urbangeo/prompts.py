"""Prompts for the candidate model. Wording is ours; the structure follows the paper (appendix C.1, Figure 7): a
system prompt that fixes the two output sections and the task's steps, then the context and question."""

from __future__ import annotations

from rig.benchmarks.urbangeo.world import Poi, humanise
from rig.records import Message

DIGITS = 5  # coordinates in prompts: 5 decimals (about 1 m); the reasoning ground truth uses the same rounding

KNOWLEDGE_SYSTEM = (
    "You answer multiple-choice questions about a city from what you know, without tools. Exactly one "
    "option is correct. Reply with the letter of that option only."
)


def knowledge_messages(question: str, options: list[str], letters: str) -> list[Message]:
    lines = [question, ""] + [f"{letters[i]}. {o}" for i, o in enumerate(options)]
    lines += ["", f"Answer with one letter ({', '.join(letters[: len(options)])})."]
    return [Message(role="system", content=KNOWLEDGE_SYSTEM), Message(role="user", content="\n".join(lines))]


_FRAME = """You are an assistant for reasoning about places in a city. Everything you need is given in the question; \
do not rely on outside knowledge. Your reply has exactly two parts.

Part 1, reasoning: explain your work step by step inside <reason> and </reason>. Show the intermediate values you \
compute. Follow these steps:
{steps}

Part 2, final answer: give only the final answer inside <answer> and </answer>, formatted as: {fmt}"""

STEPS: dict[str, tuple[list[str], str]] = {
    "DS": (
        [
            "Write down both coordinates in decimal degrees.",
            "Convert them to radians.",
            "Compute the differences in latitude and longitude.",
            "Apply the haversine formula with an Earth radius of 6371 km.",
            "State the distance.",
        ],
        "<value> km, for example <answer>2.34 km</answer>",
    ),
    "DR": (
        [
            "Write down both coordinates in decimal degrees.",
            "Convert them to radians.",
            "Compute the difference in longitude.",
            "Apply the initial-bearing (forward azimuth) formula.",
            "Convert the bearing to degrees in the range 0-360.",
            "Name the compass direction among North, Northeast, East, Southeast, South, Southwest, West, Northwest.",
        ],
        "Bearing: <value> degrees, Cardinal direction: <direction>, for example <answer>Bearing: 123.96 degrees, "
        "Cardinal direction: Southeast</answer>",
    ),
    "RE": (
        [
            "Write down the coordinates of both features.",
            "State the criteria that separate the possible relations.",
            "Test the geometry: crossings, distances between the features, points inside the area.",
            "Decide which relation applies.",
        ],
        "one relation term only, for example <answer>Intersecting</answer>",
    ),
    "PN": (
        [
            "List the locations and the bearings and distances between consecutive ones.",
            "Turn the bearings and distances into x/y positions relative to the start.",
            "Find which locations are far from the start and which cluster together.",
            "Compare the total distance of the plausible visiting orders.",
            "Pick the shortest one.",
        ],
        "the location names in visiting order joined by ->, starting with the start, for example "
        "<answer>Place A->Place B->Place C->Place D</answer>",
    ),
    "PR": (
        [
            "Follow the positions in order and describe how the person moves.",
            "Work out the overall direction of travel.",
            "Estimate the distance and direction from the last position to each candidate.",
            "Check which candidates fit the direction of travel.",
            "Choose the most likely destination.",
        ],
        "one candidate name only, for example <answer>Central Station</answer>",
    ),
    "NV": (
        [
            "Describe how the segments connect (which points they share).",
            "List the possible routes from the start to the destination.",
            "Compute the length of each route from the coordinates.",
            "Choose the shortest route.",
            "Write turn-by-turn directions for it (street names, turns, distances).",
        ],
        "numbered turn-by-turn directions naming each street in order",
    ),
    "RC": (
        [
            "Note where the user is and what they ask for.",
            "Compute the distance from the user to each option.",
            "Check every constraint (distance limit, kind of place, opening hours at the given time) for each option.",
            "Weigh the options that meet the constraints.",
            "Recommend one place.",
        ],
        "the name of one place only, for example <answer>Cafe Example</answer>",
    ),
}


def reasoning_system(task: str) -> str:
    steps, fmt = STEPS[task]
    return _FRAME.format(steps="\n".join(f"{i + 1}. {s}" for i, s in enumerate(steps)), fmt=fmt)


def reasoning_messages(task: str, prompt: str) -> list[Message]:
    return [Message(role="system", content=reasoning_system(task)), Message(role="user", content=prompt)]


# ---- coordinates and POIs as the reasoning prompts print them ---------------------------------------------------


def ll(p: tuple[float, float]) -> str:
    return f"({p[0]:.{DIGITS}f}, {p[1]:.{DIGITS}f})"


def lls(pts: list[tuple[float, float]]) -> str:
    return "[" + ", ".join(ll(p) for p in pts) + "]"


def r5(p: tuple[float, float]) -> tuple[float, float]:
    return (round(p[0], DIGITS), round(p[1], DIGITS))


def poi_block(p: Poi, with_address: bool = True) -> str:
    """A POI as the paper's context schema lists it: name, category, coordinates, address, metadata."""
    parts = [f"category: {humanise(p.category).lower()}", f"coordinates: {ll(r5(p.ll))}"]
    if with_address and p.address:
        parts.append(f"address: {p.address}")
    return f"{p.name} ({'; '.join(parts)})"
