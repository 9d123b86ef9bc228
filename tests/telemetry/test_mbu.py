"""Weights profiles (GGUF and Hugging Face folders) and the decode MBU / prefill FLOP/s arithmetic."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from rig.telemetry.mbu import GenerationCost, WeightsProfile, efficiency, gguf_profile, hf_profile, weights_profile


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path: Path, meta: dict[str, int | str], tensors: list[tuple[str, list[int], int]]) -> None:
    """A GGUF v3 file laid out as the spec says: header, metadata, tensor infos, aligned data (the bytes are 0)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta) + 1)
    for k, v in meta.items():
        out += _s(k) + (struct.pack("<II", 4, v) if isinstance(v, int) else struct.pack("<I", 8) + _s(v))
    out += _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2) + _s("a") + _s("b")  # an array, skipped
    offset = 0
    for name, dims, nbytes in tensors:
        out += _s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", 8, offset)
        offset += -(-nbytes // 32) * 32
    out += b"\0" * (-len(out) % 32)
    for _, _, nbytes in tensors:
        out += b"\0" * (-(-nbytes // 32) * 32)
    path.write_bytes(out)


LLAMA = {
    "general.architecture": "llama",
    "llama.block_count": 2,
    "llama.attention.head_count": 4,
    "llama.attention.head_count_kv": 2,
    "llama.embedding_length": 64,
}


def test_gguf_with_an_output_matrix_only_looks_the_embedding_up(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_gguf(
        path,
        LLAMA,
        [
            ("token_embd.weight", [64, 1000], 64_000),
            ("blk.0.attn_q.weight", [64, 64], 4_096),
            ("output.weight", [64, 1000], 64_000),
        ],
    )
    p = gguf_profile(path)
    assert p.touched_bytes == 4_096 + 64_000  # the embedding table is one row per token, not read in full
    assert p.touched_params == 64 * 64 + 64 * 1000
    assert (p.layers, p.kv_heads, p.head_dim, p.sliding_window) == (2, 2, 16, None)
    assert p.kv_bytes(100) == 2 * 2 * 2 * 16 * 2 * 100  # layers x (K, V) x heads x dim x f16 x positions


def test_gguf_with_tied_embeddings_reads_the_table_as_the_output_head(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_gguf(path, LLAMA, [("token_embd.weight", [64, 1000], 64_000), ("blk.0.attn_q.weight", [64, 64], 4_096)])
    assert gguf_profile(path).touched_bytes == 64_000 + 4_096


def test_embedded_gemma_profile_matches_its_file(embedded_weights: str) -> None:
    p = gguf_profile(Path(embedded_weights))
    # Gemma 3 ties its embeddings: every tensor byte is read per token; the rest of the file is header and metadata
    assert 0.95 * p.file_bytes < p.touched_bytes < p.file_bytes
    assert (p.layers, p.kv_heads, p.head_dim) == (18, 1, 256)
    assert (p.sliding_window, p.sliding_layers) == (512, 15)  # five local layers to one global
    assert 2.5e8 < p.touched_params < 2.9e8  # "270M"
    # llama.cpp's full-size SWA cache: every layer reads every cached position (masked), the window saves nothing
    assert not p.window_read and p.kv_bytes(2048) - p.kv_bytes(1024) == 18 * 2 * 256 * 2 * 1024
    # an engine that reads only the window (vLLM): past it only the three global layers' reads keep growing
    paged = p.model_copy(update={"window_read": True})
    assert paged.kv_bytes(2048) - paged.kv_bytes(1024) == 3 * 2 * 256 * 2 * 1024


def test_hf_folder_profile(tmp_path: Path) -> None:
    header = {
        "model.embed_tokens.weight": {"dtype": "BF16", "shape": [1000, 64], "data_offsets": [0, 128_000]},
        "model.layers.0.self_attn.q_proj.weight": {
            "dtype": "BF16",
            "shape": [64, 64],
            "data_offsets": [128_000, 136_192],
        },
    }
    blob = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(blob)) + blob + b"\0" * 136_192)
    cfg = {
        "num_attention_heads": 4,
        "num_hidden_layers": 6,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "hidden_size": 64,
        "sliding_window": 512,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    p = hf_profile(tmp_path)
    assert p.format == "hf" and p.touched_bytes == p.file_bytes  # tied: the table is the output head
    assert (p.sliding_layers, p.sliding_window, p.touched_params) == (5, 512, 64_000 + 4_096)


def test_weights_that_cannot_be_profiled_say_why(tmp_path: Path) -> None:
    assert weights_profile("llama3:8b") == (
        None,
        "weights 'llama3:8b' are not a local GGUF file or Hugging Face folder",
    )
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"nope")
    profile, why = weights_profile(str(bad))
    assert profile is None and why == f"weights not profiled: {bad}: not a GGUF file"


PROFILE = WeightsProfile(
    path="m", format="gguf", file_bytes=110, touched_bytes=100_000_000, touched_params=50_000_000, layers=1,
    kv_heads=1, head_dim=1000, sliding_window=None, sliding_layers=0,
)  # fmt: skip


def cost(prompt: int, completion: int, tps: float | None, prefill: float | None = 0.5) -> GenerationCost:
    return GenerationCost(
        prompt_tokens=prompt, cached_prompt_tokens=0, completion_tokens=completion, decode_tps=tps, prefill_s=prefill
    )


def test_decode_mbu_is_bytes_per_token_times_speed_over_peak() -> None:
    # KV read per token at position c: 2 x 1 x 1000 x 2 bytes x c = 4,000 c; mean position of the decoded tokens
    # 100 + 11/2; 10 tokens after the first at 20 tokens/s
    e = efficiency([cost(100, 11, 20.0)], PROFILE, None, 4e9, 1e12, None)
    per_token = 100_000_000 + 4_000 * 105.5
    assert e.bytes_per_token == pytest.approx(per_token)
    assert e.decode_bytes_per_s == pytest.approx(per_token * 20)
    assert e.mbu == pytest.approx(per_token * 20 / 4e9)
    assert e.prefill_flops_per_s == pytest.approx(2 * 50_000_000 * 100 / 0.5)
    assert e.prefill_share == pytest.approx(2e10 / 1e12)


def test_mbu_weights_generations_by_their_decode_time() -> None:
    e = efficiency(
        [cost(0, 11, 10.0), cost(0, 31, 30.0)], PROFILE.model_copy(update={"head_dim": 0}), None, 1e9, None, None
    )
    # 10 tokens in 1 s and 30 tokens in 1 s: 40 tokens in 2 s, 20 tokens/s (not the mean of the two speeds per call)
    assert e.decode_bytes_per_s == pytest.approx(100_000_000 * 20)


def test_unmeasured_mbu_is_none_with_the_reason_never_zero() -> None:
    e = efficiency([cost(10, 5, 10.0)], None, "weights 'x' are not a local GGUF file", 1e9, 1e12, None)
    assert e.mbu is None and e.mbu_reason == "weights 'x' are not a local GGUF file"
    e = efficiency([cost(10, 5, 10.0)], PROFILE, None, None, None, "no bandwidth probe for this host")
    assert e.mbu is None and e.mbu_reason == "no bandwidth probe for this host"
    assert e.decode_bytes_per_s is not None and e.decode_bytes_per_s > 0  # achieved bandwidth is still measured
    e = efficiency([cost(10, 1, None, None)], PROFILE, None, 1e9, 1e12, None)
    assert e.mbu is None and e.mbu_reason == "no generation reported a decode speed"
    assert e.prefill_flops_per_s is None and e.prefill_reason == "no generation reported its prefill time"
    e = efficiency([cost(10, 5, 10.0)], PROFILE, None, 1e9, 1e12, None, overlapping=True)
    assert e.mbu is None and "concurrency > 1" in (e.mbu_reason or "")


def test_a_peak_below_what_a_run_achieved_never_gives_mbu_over_100_percent() -> None:
    per_token = 100_000_000 + 4_000 * 105.5
    achieved = per_token * 20  # about 2.0 GB/s
    e = efficiency([cost(100, 11, 20.0)], PROFILE, None, 1.5e9, 1e12, None)
    assert e.mbu is None and e.decode_bytes_per_s == pytest.approx(achieved)
    assert e.mbu_reason == (
        f"over 100% of the cached peak ({achieved / 1e9:.2f} GB/s decoded against a peak of 1.50 GB/s): the peak is "
        "wrong; run `rig doctor --bandwidth --refresh` on a quiet host"
    )
    e = efficiency([cost(100, 11, 20.0)], PROFILE, None, 1.5e9, 1e12, None, nvml_bps=1.9e9)
    assert e.mbu_nvml is None and e.mbu_nvml_reason is not None and "over 100% of NVML" in e.mbu_nvml_reason


def test_a_run_near_the_peak_puts_the_peak_in_doubt() -> None:
    achieved = (100_000_000 + 4_000 * 105.5) * 20
    e = efficiency([cost(100, 11, 20.0)], PROFILE, None, achieved / 0.95, 1e12, None, peak_doubts=["old"])
    assert e.mbu == pytest.approx(0.95)
    assert e.peak_doubts == ["old", "this run decoded at 95% of it (a peak probed under load reads low)"]
    e = efficiency([cost(100, 11, 20.0)], PROFILE, None, achieved / 0.8, 1e12, None, peak_source="CPU probe of x")
    assert e.mbu == pytest.approx(0.8) and e.peak_doubts == [] and e.peak_source == "CPU probe of x"


@pytest.mark.parametrize("peak", [-2.5e9, 0.0, float("nan"), float("inf")])
def test_a_peak_that_is_not_a_positive_number_is_no_peak_never_a_negative_mbu(peak: float) -> None:
    e = efficiency([cost(100, 11, 20.0)], PROFILE, None, peak, peak, "no usable peak", nvml_bps=peak)
    assert e.mbu is None and e.mbu_reason == "no usable peak" and e.mbu_nvml is None
    assert e.peak_bytes_per_s is None and e.peak_flops_per_s is None and e.prefill_share is None
