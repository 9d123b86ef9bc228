"""The one output-constraint type every engine understands."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, model_validator

ConstraintKind = Literal["json_schema", "yaml_schema", "grammar", "regex", "choice"]


class Constraint(BaseModel):
    """What the engine must force the output to match.

    json_schema / yaml_schema: ``schema_`` is a JSON schema; YAML output must load with
    ``yaml.safe_load`` into a value that validates against it.
    grammar: ``grammar`` is raw GBNF text. regex: ``pattern``. choice: ``choices``.
    """

    kind: ConstraintKind
    schema_: dict[str, Any] | None = None
    grammar: str | None = None
    pattern: str | None = None
    choices: list[str] | None = None

    @model_validator(mode="after")
    def _payload_matches_kind(self) -> Constraint:
        need = {
            "json_schema": "schema_",
            "yaml_schema": "schema_",
            "grammar": "grammar",
            "regex": "pattern",
            "choice": "choices",
        }[self.kind]
        if getattr(self, need) in (None, [], ""):
            raise ValueError(f"constraint kind {self.kind!r} needs field {need!r}")
        return self
