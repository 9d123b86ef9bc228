"""RouteEval's metric and error taxonomy (paper sec. 3.6-3.7, Tables 2, 5 and 6).

accuracy = max(0, 1 - |d_actual - d_target| / d_target). A run succeeds when the call was usable, every
waypoint geocoded, the route was measured and it is within 50% of the target: the paper's Table 3 success
counts equal the runs minus the errors of Table 6 (GPT-5: 800 - (28 + 32 + 8 + 3) = 729), so a distance
mismatch over 50% is an error, not a success.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

PERFECT = 0.95  # Table 2 caption: perfect routes have accuracy >= 0.95
HIGH = 0.80  # high accuracy: within 20% of the target
MISMATCH = 0.50  # a deviation above 50% of the target is the error "distance mismatch"

# The paper's error taxonomy (Table 5), in its order, with its labels.
ERRORS: dict[str, str] = {
    "invalid_waypoint": "Invalid waypoints",
    "distance_mismatch": "Distance mismatch >50%",
    "tool_calling_failure": "Tool calling failure",
    "timeout": "API timeout",
    "invalid_route_type": "Invalid route type",
    "other": "Other errors",
}


def accuracy(d_actual: float, d_target: float) -> float:
    """The paper's equation (1); symmetric, linear, clipped at 0."""
    if not (math.isfinite(d_target) and d_target > 0):
        raise ValueError(f"target distance must be a positive number, got {d_target!r}")
    if not (math.isfinite(d_actual) and d_actual >= 0):
        raise ValueError(f"actual distance must be a non-negative number, got {d_actual!r}")
    return max(0.0, 1.0 - abs(d_actual - d_target) / d_target)


def deviation(d_actual: float, d_target: float) -> float:
    return abs(d_actual - d_target) / d_target


def is_mismatch(d_actual: float, d_target: float) -> bool:
    return deviation(d_actual, d_target) > MISMATCH


def normalise_route_type(value: Any) -> str | None:
    """'Loop', 'out and back', 'point_to_point' -> the enum value; None for anything else."""
    if not isinstance(value, str):
        return None
    v = "-".join(value.strip().lower().replace("_", " ").replace("-", " ").split())
    return v if v in ("loop", "out-and-back", "point-to-point") else None


def check_call(args: Any, max_waypoints: int, address_max: int) -> tuple[str | None, str | None, dict[str, Any]]:
    """(error category, reason, cleaned arguments) for a call's arguments, before any map lookup.

    What the tool needs is checked; extra keys and a missing or long description are tolerated (the paper's
    tool only reads the addresses). An unknown route type is its own error class (Table 5)."""
    if not isinstance(args, dict):
        return "tool_calling_failure", "arguments are not an object", {}
    missing = [k for k in ("estimated_distance", "route_type", "waypoints") if k not in args]
    if missing:
        return "tool_calling_failure", f"missing argument(s): {', '.join(missing)}", {}
    est = args["estimated_distance"]
    try:  # float() of a huge integer overflows; repr of one over 4,300 digits raises
        finite = not isinstance(est, bool) and isinstance(est, (int, float)) and math.isfinite(float(est))
    except OverflowError:
        finite = False
    if not finite:
        shown = reprlib.repr(est) if not isinstance(est, int) else f"an integer of {est.bit_length()} bits"
        return "tool_calling_failure", f"estimated_distance is not a finite number: {shown}", {}
    rt = normalise_route_type(args["route_type"])
    if rt is None:
        why = f"route_type {args['route_type']!r} is not loop, out-and-back or point-to-point"
        return "invalid_route_type", why, {}
    wps = args["waypoints"]
    if not isinstance(wps, list):
        return "tool_calling_failure", "waypoints is not a list", {}
    if not 2 <= len(wps) <= max_waypoints:
        return "tool_calling_failure", f"{len(wps)} waypoints; a route takes 2 to {max_waypoints}", {}
    addresses = []
    for i, w in enumerate(wps):
        addr = w.get("address") if isinstance(w, dict) else None
        if not isinstance(addr, str) or not addr.strip():
            return "tool_calling_failure", f"waypoints[{i}] has no address", {}
        if len(addr) > address_max:
            return "tool_calling_failure", f"waypoints[{i}].address is longer than {address_max} characters", {}
        addresses.append(addr.strip())
    return None, None, {"estimated_distance": float(est), "route_type": rt, "addresses": addresses}
