"""`rig models quantize`: a new GGUF variant from an existing one, through llama.cpp's quantize API."""

from __future__ import annotations

import contextlib
import ctypes
from pathlib import Path

import yaml

from rig.records import write_atomic
from rig.registry import ModelSpec, RegistryError


def ftype_for(label: str) -> int:
    import llama_cpp

    name = "LLAMA_FTYPE_MOSTLY_" + label.upper()
    if not hasattr(llama_cpp, name):
        known = sorted(
            n[len("LLAMA_FTYPE_MOSTLY_") :].lower() for n in dir(llama_cpp) if n.startswith("LLAMA_FTYPE_MOSTLY_")
        )
        raise RegistryError(f"unknown quantization {label!r}; llama.cpp knows: {', '.join(known)}")
    return int(getattr(llama_cpp, name))


def quantize_gguf(src: str, dst: Path, label: str, threads: int | None = None) -> Path:
    import llama_cpp

    ftype = ftype_for(label)
    dst.parent.mkdir(parents=True, exist_ok=True)
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.allow_requantize = True  # the source may already be quantized (the embedded model is Q4_K_M)
    if threads:
        p.nthread = threads
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(p))
    if rc != 0 or not dst.exists():
        raise RuntimeError(f"llama.cpp quantize failed (code {rc}) for {src} -> {dst}")
    return dst


def variant_entry(spec: ModelSpec, label: str, gguf: Path) -> dict:
    """A models.yaml entry for the new file, inheriting everything else from the source model."""
    entry = spec.model_dump(mode="json", exclude={"name", "base", "variant", "weights"}, exclude_defaults=True)
    entry.update(
        engine=spec.engine,
        weights={"file": str(gguf)},
        quantization=label.lower(),
        context_length=spec.context_length,
        description=f"{spec.name} requantized to {label.lower()} by rig models quantize",
    )
    return entry


def append_entry(models_file: Path, name: str, entry: dict) -> None:
    """Append as text so the user's comments and layout survive."""
    kind = next(iter(entry["weights"]))  # file (a GGUF) or dir (a converted folder)
    w = Path(entry["weights"][kind])
    with contextlib.suppress(ValueError):  # keep the registry relocatable when the weights sit beside it
        entry["weights"][kind] = str(w.relative_to(models_file.resolve().parent))
    text = models_file.read_text()
    current = yaml.safe_load(text) or {}
    if name in (current.get("models") or {}):
        raise RegistryError(f"{models_file}: models.{name} already exists")
    block = yaml.safe_dump({name: entry}, sort_keys=False)
    indented = "".join(f"  {line}\n" for line in block.splitlines())
    write_atomic(models_file, text.rstrip("\n") + "\n\n" + indented)
