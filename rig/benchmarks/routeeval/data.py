"""Prompt packs: YAML files of running-route requests, loaded into validated records.

A pack names its prompts, the bins that tag a target distance as short or long, and optional geocoding aliases
(English names of places the map knows under another name). Every problem is a DataError naming file and field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rig.benchmarks.base import DataError

RouteType = Literal["loop", "out-and-back", "point-to-point"]
# The paper's bins (sec. 4.9.3, Table 7): short routes 2-4 miles, long routes 8-13.1 miles.
PAPER_LENGTH_BINS: dict[Literal["short", "long"], tuple[float, float]] = {"short": (2.0, 4.0), "long": (8.0, 13.1)}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RoutePrompt(_Strict):
    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    target_miles: float = Field(gt=0, le=100)
    route_type: RouteType
    city: str | None = None  # where waypoints are validated; None for generic prompts (no place named)
    region: Literal["US", "international", "generic"]
    category: Literal["simple", "moderate", "complex"]
    style: Literal["simple", "terrain", "landmark", "multi"]
    # Waypoints (map names, in order) that realise about target_miles on the pack the prompt was written for:
    # evidence that the prompt is feasible there, and the scripted oracle's answer in tests.
    reference: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _generic_has_no_city(self) -> RoutePrompt:
        if (self.region == "generic") != (self.city is None):
            raise ValueError("generic prompts have no city, and only generic prompts lack one")
        return self


class PromptPack(_Strict):
    name: str
    description: str = ""
    length_bins: dict[Literal["short", "long"], tuple[float, float]] = Field(
        default_factory=lambda: dict(PAPER_LENGTH_BINS)
    )
    aliases: dict[str, str] = Field(default_factory=dict)  # other names of a place -> its name on the map
    prompts: list[RoutePrompt] = Field(min_length=1)

    @field_validator("length_bins")
    @classmethod
    def _bins_ordered(cls, v: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for k, (lo, hi) in v.items():
            if lo > hi:
                raise ValueError(f"{k}: lower bound {lo} above upper bound {hi}")
        return v

    @model_validator(mode="after")
    def _unique_ids(self) -> PromptPack:
        seen: set[str] = set()
        for p in self.prompts:
            if p.id in seen:
                raise ValueError(f"duplicate prompt id {p.id!r}")
            seen.add(p.id)
        return self

    def length_of(self, miles: float) -> str:
        """short / long by the pack's bins (inclusive), else other."""
        for name in ("short", "long"):
            bounds = self.length_bins.get(name)
            if bounds is not None and bounds[0] <= miles <= bounds[1]:
                return name
        return "other"


# A prompt pack is a few kilobytes of prompts and bins.
MAX_PACK_BYTES = 4 << 20
MAX_PACK_VALUES = 200_000


def load_prompt_pack(path: Path) -> PromptPack:
    from rig.inputs import InputError, read_yaml

    if not path.exists():
        raise DataError(f"{path}: prompt pack not found")
    try:  # bounded: a FIFO, a device, an alias bomb or deep nesting is named, never waited on
        raw = read_yaml(path, max_bytes=MAX_PACK_BYTES, max_nodes=MAX_PACK_VALUES)
    except InputError as exc:
        raise DataError(f"{path}: not readable as YAML: {str(exc).removeprefix(f'{path}: ')}") from None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: a prompt pack is a mapping with 'name' and 'prompts'")
    try:
        return PromptPack.model_validate(raw)
    except ValidationError as exc:
        errs = []
        for e in exc.errors()[:5]:
            loc = list(e["loc"])
            if len(loc) >= 2 and loc[0] == "prompts" and isinstance(loc[1], int):
                items = raw.get("prompts") or []
                pid = items[loc[1]].get("id") if loc[1] < len(items) and isinstance(items[loc[1]], dict) else None
                loc[1] = f"{loc[1]} (id {pid})" if pid else loc[1]
            errs.append(f"{'.'.join(str(x) for x in loc) or '(top)'}: {e['msg']}")
        raise DataError(f"{path}: " + "; ".join(errs)) from None
