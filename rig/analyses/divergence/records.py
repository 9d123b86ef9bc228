"""The divergence pass's typed records: its settings, the rows it writes and the report, and the bound on --top-k."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from rig.records import (
    DEFAULT_DIVERGENCE_TOP_K,
    DivergenceTopK,
)

DIVERGENCE_FORMAT = 1
PREFETCH_WINDOW = 64  # sequences a scorer is handed ahead (a vLLM batch); bounds the rows held between them
CSV_COLUMNS = (
    "variant",
    "reference",
    "kind",
    "token_class",
    "tokens",
    "mean_kld",
    "kld_ci_low",
    "kld_ci_high",
    "top1_agreement",
    "p99_kld",
    "mean_logprob_reference",
    "mean_logprob_variant",
    "bound",
    "top_k",
)
EPISODE_COLUMNS = (
    "variant",
    "episode_id",
    "repeat",
    "token_class",
    "tokens",
    "mean_kld",
    "top1_agreement",
    "score_reference",
    "score_variant",
    "score_delta",
)


class DivergenceError(ValueError):
    """Bad input for a divergence pass; str() names the run or variant and the field (exit code 2)."""


class VariantSource(BaseModel):
    """A variant to teacher-force: a models.yaml entry, and optionally its own run of the same benchmark (for the
    per-episode score deltas)."""

    model: str
    run: str | None = None
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or self.model


class DivergenceSettings(BaseModel):
    """What a divergence pass reads and how; written as JSON for the child process that runs it."""

    reference_run: str
    reference_label: str | None = None
    variants: list[VariantSource]
    out: str
    models_file: str | None = None
    chunk: int = Field(default=64, ge=1, le=512)  # reply positions decoded (and rows of logits held) at a time
    n_boot: int = Field(default=1000, ge=100)
    seed: int = 0
    worst: int = Field(default=10, ge=0)  # worst tokens kept per variant
    threads: int | None = None
    top_k: DivergenceTopK = DEFAULT_DIVERGENCE_TOP_K  # prompt log-probabilities asked of a vLLM model per position


Kind = Literal["quantization", "engine divergence", "self"]
# "exact": both sides full distributions; "lower": a top-k side, so KLD values are the coarse-grained lower bound
# (top-1 agreement and log-probs stay exact).
Bound = Literal["exact", "lower"]


class ClassRow(BaseModel):
    variant: str
    reference: str
    kind: Kind
    token_class: str
    tokens: int
    mean_kld: float | None = None
    kld_ci_low: float | None = None
    kld_ci_high: float | None = None
    top1_agreement: float | None = None
    p99_kld: float | None = None
    mean_logprob_reference: float | None = None
    mean_logprob_variant: float | None = None
    bound: Bound = "exact"
    top_k: int | None = None  # k of the top-k side when the bound is "lower"


class EpisodeRow(BaseModel):
    variant: str
    episode_id: str
    repeat: int
    token_class: str
    tokens: int
    mean_kld: float
    top1_agreement: float
    score_reference: float | None = None
    score_variant: float | None = None
    score_delta: float | None = None


class WorstToken(BaseModel):
    variant: str
    episode_id: str
    repeat: int
    token_class: str
    token: str
    context: str  # reply text before the token, the token in [[ ]], a little after
    kld: float
    logprob_reference: float
    logprob_variant: float


class DivergenceReport(BaseModel):
    format_version: int = DIVERGENCE_FORMAT
    settings: DivergenceSettings
    reference: str
    engine: str  # the reference's
    engines: dict[str, str] = Field(default_factory=dict)  # variant label -> engine
    full_vocabulary: bool = True  # False: some pair had a top-k side (its rows say bound "lower")
    tokenizer: str
    episodes: int
    pairs: int
    skipped: dict[str, str] = Field(default_factory=dict)  # "episode_id#repeat" -> why it was left out
    request_mismatches: list[str] = Field(default_factory=list)
    classes: list[ClassRow]
    episode_rows: list[EpisodeRow]
    worst: list[WorstToken]
    seconds: dict[str, float] = Field(default_factory=dict)  # replay, scoring (wall)


# -- replay ------------------------------------------------------------------------------------------------------


def check_top_k(top_k: int) -> int:
    """``--top-k`` under DivergenceSettings' bound; a DivergenceError naming the flag (checked before variants run)."""
    from pydantic import TypeAdapter

    try:
        return TypeAdapter(DivergenceTopK).validate_python(top_k)
    except ValidationError as e:
        raise DivergenceError(f"--top-k {top_k!r}: {e.errors()[0]['msg']}") from None
