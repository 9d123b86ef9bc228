"""Memory-bandwidth utilisation of decoding and achieved FLOP/s of prefill, from a profile of the weights.

Decoding one token reads every weight it touches once plus the KV cache up to the current position, so
decode MBU = bytes per token x decode tokens/s / the device's peak read bandwidth (`rig.telemetry.bandwidth`).
Weights touched per token: every tensor, except that the token-embedding table is only looked up (one row) when the
model has a separate output matrix; with tied embeddings the table is read in full as the output head. The KV cache
read at context length c: for each layer, keys and values of min(c, window) positions (the window only on a
sliding-window layer whose engine reads only the window), at 2 bytes an element (f16, llama.cpp's and vLLM's
default cache type). Prefill FLOPs per token are 2 x the parameters touched (attention's own FLOPs are left out:
small at these context lengths).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, Field

from rig.telemetry.peak import NEAR_PEAK, REFRESH_HINT

KV_BYTES = 2  # f16 cache elements


class WeightsProfile(BaseModel):
    """What a model's weights cost per token; read from a GGUF file or a Hugging Face folder."""

    path: str
    format: str  # "gguf" / "hf"
    file_bytes: int  # the whole file (or the folder's safetensors)
    touched_bytes: int  # weight bytes read per decoded token
    touched_params: int  # parameters in those tensors
    layers: int
    kv_heads: int
    head_dim: int
    sliding_window: int | None = None
    sliding_layers: int = 0  # layers attending within the window only
    # whether those layers read only the window: vLLM's paged cache does; llama.cpp's full-size SWA cache (its
    # default, swa_full) keeps every position and masks, so its attention reads all of them
    window_read: bool = True

    def kv_bytes(self, context: float) -> float:
        """KV-cache bytes read for one token at position ``context``."""
        per_pos = 2 * self.kv_heads * self.head_dim * KV_BYTES
        full = self.layers - self.sliding_layers
        window = min(context, self.sliding_window) if self.sliding_window and self.window_read else context
        return per_pos * (full * context + self.sliding_layers * window)

    def bytes_per_token(self, context: float) -> float:
        return self.touched_bytes + self.kv_bytes(context)


class ProfileError(ValueError):
    """A weights file rig cannot profile; str() names it and what is wrong."""


# GGUF value types -> struct formats (8 string, 9 array are read separately)
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _read(f: BinaryIO, fmt: str) -> int | float | bool:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise ProfileError("truncated")
    return struct.unpack(fmt, data)[0]


def _string(f: BinaryIO) -> str:
    n = int(_read(f, "<Q"))
    if n > 1 << 24:
        raise ProfileError("implausible string length")
    return f.read(n).decode("utf-8", "replace")


def _value(f: BinaryIO, kind: int) -> object:
    if kind in _SCALAR:
        return _read(f, _SCALAR[kind])
    if kind == 8:
        return _string(f)
    if kind == 9:
        inner, n = int(_read(f, "<I")), int(_read(f, "<Q"))
        if inner == 8:
            for _ in range(n):
                _string(f)
            return None
        if inner not in _SCALAR:
            raise ProfileError(f"array of unknown type {inner}")
        f.seek(struct.calcsize(_SCALAR[inner]) * n, 1)  # arrays (the vocabulary) are skipped, not kept
        return None
    raise ProfileError(f"unknown value type {kind}")


def read_gguf(path: Path) -> tuple[dict[str, object], list[tuple[str, list[int], int]], int]:
    """Metadata, tensors (name, shape, bytes) and the data section's offset of a GGUF file (version 2 or 3)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise ProfileError(f"{path}: not a GGUF file")
        version = int(_read(f, "<I"))
        if version < 2:
            raise ProfileError(f"{path}: GGUF version {version} is not read (2 and 3 are)")
        n_tensors, n_kv = int(_read(f, "<Q")), int(_read(f, "<Q"))
        meta: dict[str, object] = {}
        for _ in range(n_kv):
            key = _string(f)
            meta[key] = _value(f, int(_read(f, "<I")))
        infos = []
        for _ in range(n_tensors):
            name = _string(f)
            dims = [int(_read(f, "<Q")) for _ in range(int(_read(f, "<I")))]
            _read(f, "<I")  # ggml type: the size comes from the offsets
            infos.append((name, dims, int(_read(f, "<Q"))))
        align = int(meta.get("general.alignment", 32))  # type: ignore[call-overload]
        start = -(-f.tell() // align) * align
    ends = [*sorted(off for _, _, off in infos)[1:], size - start]
    by_offset = dict(zip(sorted(off for _, _, off in infos), ends, strict=True))
    return meta, [(n, d, by_offset[off] - off) for n, d, off in infos], start


def _prod(dims: list[int]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


def gguf_profile(path: Path) -> WeightsProfile:
    try:
        meta, tensors, _ = read_gguf(path)
    except (OSError, struct.error) as e:
        raise ProfileError(f"{path}: {e}") from None
    arch = str(meta.get("general.architecture", ""))

    def num(key: str, default: int | None = None) -> int:
        v = meta.get(f"{arch}.{key}", default)
        if not isinstance(v, (int, float)):
            raise ProfileError(f"{path}: metadata {arch}.{key} missing")
        return int(v)

    names = {n for n, _, _ in tensors}
    lookup_only = {"token_embd.weight"} if "output.weight" in names else set()
    touched = [(d, b) for n, d, b in tensors if n not in lookup_only]
    heads = num("attention.head_count")
    head_dim = num("attention.key_length", num("embedding_length") // heads)
    layers = num("block_count")
    window = meta.get(f"{arch}.attention.sliding_window")
    sliding = 0
    if isinstance(window, int) and window > 0:
        # llama.cpp's Gemma 3: five sliding-window layers, then one global, repeated
        sliding = layers - layers // 6 if arch == "gemma3" else 0
    return WeightsProfile(
        path=str(path),
        format="gguf",
        file_bytes=path.stat().st_size,
        touched_bytes=sum(b for _, b in touched),
        touched_params=sum(_prod(d) for d, _ in touched),
        layers=layers,
        kv_heads=num("attention.head_count_kv", heads),
        head_dim=head_dim,
        sliding_window=int(window) if isinstance(window, int) and sliding else None,
        sliding_layers=sliding,
        window_read=False,  # a GGUF runs on llama.cpp
    )


def hf_profile(folder: Path) -> WeightsProfile:
    """A Hugging Face folder: safetensors sizes (the header is a few KiB) and config.json."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ProfileError(f"{folder}: no .safetensors files")
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ProfileError(f"{folder / 'config.json'}: {e}") from None
    cfg = cfg.get("text_config", cfg)
    total = sum(p.stat().st_size for p in files)
    embed = 0
    params = 0
    for p in files:
        with p.open("rb") as f:
            n = int(_read(f, "<Q"))
            header = json.loads(f.read(n))
        for name, t in header.items():
            if name == "__metadata__":
                continue
            count = _prod(t["shape"])
            params += count
            if name.endswith("embed_tokens.weight") and not cfg.get("tie_word_embeddings", True):
                embed += t["data_offsets"][1] - t["data_offsets"][0]
                params -= count
    heads = int(cfg["num_attention_heads"])
    layers = int(cfg["num_hidden_layers"])
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types") or []
    sliding = sum(t == "sliding_attention" for t in types) if window else 0
    return WeightsProfile(
        path=str(folder),
        format="hf",
        file_bytes=total,
        touched_bytes=total - embed,
        touched_params=params,
        layers=layers,
        kv_heads=int(cfg.get("num_key_value_heads", heads)),
        head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // heads),
        sliding_window=int(window) if sliding else None,
        sliding_layers=sliding,
    )


def weights_profile(weights: str) -> tuple[WeightsProfile | None, str | None]:
    """The profile of a run's weights, or None and why (a served or Ollama model: rig cannot see its file)."""
    path = Path(weights)
    try:
        if path.is_file() and path.suffix == ".gguf":
            return gguf_profile(path), None
        if path.is_dir():
            return hf_profile(path), None
    except (ProfileError, KeyError, TypeError, ValueError) as e:
        return None, f"weights not profiled: {e}"
    return None, f"weights {weights!r} are not a local GGUF file or Hugging Face folder"


class Efficiency(BaseModel):
    """A run's decode MBU and prefill FLOP/s; each None comes with its reason."""

    mbu: float | None = None
    mbu_reason: str | None = None
    decode_bytes_per_s: float | None = None
    bytes_per_token: float | None = None  # mean over the decoded tokens
    peak_bytes_per_s: float | None = None
    peak_nvml_bytes_per_s: float | None = None
    mbu_nvml: float | None = None  # against NVML's data-sheet figure (GPU)
    mbu_nvml_reason: str | None = None
    # where the peak came from (a probe's time and conditions), and why it may read low: shown beside every MBU
    peak_source: str | None = None
    peak_doubts: list[str] = Field(default_factory=list)
    prefill_flops_per_s: float | None = None
    peak_flops_per_s: float | None = None
    prefill_reason: str | None = None

    @property
    def peak_wrong(self) -> bool:
        """The run decoded faster than the peak: no MBU is given, the peak is wrong."""
        return self.mbu is None and (self.mbu_reason or "").startswith("over 100%")

    @property
    def peak_note(self) -> str:
        """The peak's source and its doubts with what to run, in words: what every report shows beside the MBU."""
        parts = [f"peak: {self.peak_source}"] if self.peak_source else []
        if self.peak_doubts:
            parts.append(f"peak in doubt: {'; '.join(self.peak_doubts)}; {REFRESH_HINT}")
        return "; ".join(parts)

    @property
    def prefill_share(self) -> float | None:
        if self.prefill_flops_per_s is None or not self.peak_flops_per_s:
            return None
        return self.prefill_flops_per_s / self.peak_flops_per_s


class GenerationCost(BaseModel):
    """What MBU needs of one generation (from the stored record)."""

    prompt_tokens: int | None
    cached_prompt_tokens: int | None
    completion_tokens: int | None
    decode_tps: float | None
    prefill_s: float | None


def _positive(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) and v > 0 else None


def efficiency(
    gens: list[GenerationCost],
    profile: WeightsProfile | None,
    profile_reason: str | None,
    peak_bps: float | None,
    peak_flops: float | None,
    peak_reason: str | None,
    nvml_bps: float | None = None,
    overlapping: bool = False,
    peak_source: str | None = None,
    peak_doubts: list[str] | None = None,
) -> Efficiency:
    """Decode MBU over the generations (decode time-weighted: all bytes over all decode seconds) and prefill FLOP/s.
    An MBU over 100% is never given: decoding cannot read faster than the memory, so the peak is wrong (probed under
    load, or on other hardware) and the reason says so; a run at `NEAR_PEAK` of it or more adds a doubt about the
    peak. A peak that is not a positive finite number counts as none."""
    peak_bps, peak_flops, nvml_bps = (_positive(v) for v in (peak_bps, peak_flops, nvml_bps))
    out = Efficiency(
        peak_bytes_per_s=peak_bps,
        peak_nvml_bytes_per_s=nvml_bps,
        peak_flops_per_s=peak_flops,
        peak_source=peak_source,
        peak_doubts=list(peak_doubts or []),
    )
    if profile is None:
        out.mbu_reason = out.prefill_reason = profile_reason or "weights not profiled"
        return out
    if overlapping:
        why = "episodes overlapped (concurrency > 1): a batch reads the weights once for all its sequences"
        out.mbu_reason = out.prefill_reason = why
        return out
    _decode_mbu(out, gens, profile, peak_bps, nvml_bps, peak_reason)
    _prefill(out, gens, profile, peak_flops, peak_reason)
    return out


def _decode_mbu(
    out: Efficiency,
    gens: list[GenerationCost],
    profile: WeightsProfile,
    peak_bps: float | None,
    nvml_bps: float | None,
    peak_reason: str | None,
) -> None:
    """Decode bytes per second over all decode seconds, set against the peak and NVML's figure, into ``out``."""
    nbytes = secs = tokens = 0.0
    for g in gens:
        n, tps, p = g.completion_tokens, g.decode_tps, g.prompt_tokens
        if n is None or n < 2 or not tps or p is None:
            continue
        # decode_tps counts the tokens after the first over their span; the mean position among them
        nbytes += profile.bytes_per_token(p + n / 2) * (n - 1)
        secs += (n - 1) / tps
        tokens += n - 1
    if secs > 0:
        out.decode_bytes_per_s = nbytes / secs
        out.bytes_per_token = nbytes / tokens
        achieved = out.decode_bytes_per_s
        if peak_bps:
            share = achieved / peak_bps
            if share > 1:
                out.mbu_reason = (
                    f"over 100% of the cached peak ({achieved / 1e9:.2f} GB/s decoded against a peak of "
                    f"{peak_bps / 1e9:.2f} GB/s): the peak is wrong; {REFRESH_HINT}"
                )
            else:
                out.mbu = share
                if share >= NEAR_PEAK:
                    out.peak_doubts.append(
                        f"this run decoded at {100 * share:.0f}% of it (a peak probed under load reads low)"
                    )
        else:
            out.mbu_reason = peak_reason or "no peak bandwidth"
        if nvml_bps:
            if achieved > nvml_bps:
                out.mbu_nvml_reason = (
                    f"over 100% of NVML's data-sheet {nvml_bps / 1e9:.0f} GB/s: the bytes per token or the "
                    "data-sheet figure is wrong"
                )
            else:
                out.mbu_nvml = achieved / nvml_bps
    else:
        out.mbu_reason = "no generation reported a decode speed"


def _prefill(
    out: Efficiency,
    gens: list[GenerationCost],
    profile: WeightsProfile,
    peak_flops: float | None,
    peak_reason: str | None,
) -> None:
    """Prefill FLOP/s over the uncached prompt tokens, into ``out``."""
    flops = pf_secs = 0.0
    for g in gens:
        if g.prompt_tokens is None or not g.prefill_s:
            continue
        flops += 2 * profile.touched_params * max(0, g.prompt_tokens - (g.cached_prompt_tokens or 0))
        pf_secs += g.prefill_s
    if pf_secs > 0 and flops > 0:
        out.prefill_flops_per_s = flops / pf_secs
        if not peak_flops:
            out.prefill_reason = peak_reason or "no peak FLOP/s"
    else:
        out.prefill_reason = "no generation reported its prefill time"
