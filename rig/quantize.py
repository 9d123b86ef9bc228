"""`rig models quantize`: a new GGUF variant from an existing one, through llama.cpp's quantize API, registered in
a models.yaml (created when missing). `rig models convert` registers its folders through the same functions."""

from __future__ import annotations

import contextlib
import copy
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from rig.inputs import InputError, read_text
from rig.records import atomic_path
from rig.registry import (
    MAX_REGISTRY_BYTES,
    ModelSpec,
    RegistryError,
    default_registry_path,
    load_registry,
    shipped_registry_path,
)


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
    """Quantize ``src`` to ``dst`` (written under a temporary name and renamed when whole: a failed or stopped
    quantize leaves no short GGUF). llama.cpp runs in a child process: a signal reaching this process while llama.cpp
    logs through llama-cpp-python's Python callback would be raised inside the callback, where ctypes prints and
    drops it, and the quantize would go on to report success; the child is stopped instead and the interrupt
    raised here."""
    ftype = ftype_for(label)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dst) as tmp:
        rc = run_quantize(str(src), tmp, ftype, threads)
        if rc != 0 or not tmp.exists():
            raise RuntimeError(f"llama.cpp quantize failed (code {rc}) for {src} -> {dst}")
    return dst


def run_quantize(src: str, out: Path, ftype: int, threads: int | None) -> int:
    """llama.cpp's quantize in a child process (``_quantize_main``); its return code (negative: the signal that
    ended it). Ctrl-C or SIGTERM here stops the child before the KeyboardInterrupt goes on."""
    argv = [sys.executable, "-c", "from rig.quantize import _quantize_main; _quantize_main()"]
    proc = subprocess.Popen([*argv, src, str(out), str(ftype), str(threads or 0)])
    try:
        return proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def _quantize_main() -> None:
    """The child's side of ``run_quantize``: ``SRC OUT FTYPE THREADS``; exit 0 when llama.cpp returned 0."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a terminal's Ctrl-C ends the child at once, callback or not
    import llama_cpp

    src, out, ftype, threads = sys.argv[1:5]
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = int(ftype)
    p.allow_requantize = True  # the source may already be quantized (the embedded model is Q4_K_M)
    if int(threads):
        p.nthread = int(threads)
    raise SystemExit(1 if llama_cpp.llama_model_quantize(src.encode(), out.encode(), ctypes.byref(p)) != 0 else 0)


def source_registries(models_file: Path | None) -> list[Path]:
    """Where a source model is looked up, in order: ``models_file``, the registry `rig` reads without ``--models``
    (``$RIG_MODELS`` or ./models.yaml) and the one shipped with rig; each once, a missing one skipped. The shipped
    one comes last even when ./models.yaml is the models file, so a file an earlier quantize started does not hide
    the built-in models."""
    found: list[Path] = []
    for cand in (models_file, default_registry_path(), shipped_registry_path()):
        if cand is not None and Path(cand).exists() and all(Path(cand).resolve() != f.resolve() for f in found):
            found.append(Path(cand))
    return found


def find_source(model: str, models_file: Path | None) -> tuple[ModelSpec, str]:
    """The model to quantize or convert, and the registry path its weights resolve against: the first of
    ``source_registries`` that names it (a broken file is a RegistryError naming file and field), so a new file can
    be started from a built-in model."""
    known: set[str] = set()
    paths = source_registries(models_file)
    for path in paths:
        reg = load_registry(path)
        if model in reg.models or model in reg.defaults:
            return reg.get(model), reg.path
        known |= set(reg.models) | set(reg.defaults)
    where = " or ".join(str(p) for p in paths) or f"{models_file or default_registry_path()} (not found)"
    raise RegistryError(f"no model named {model!r} in {where}. Known: {', '.join(sorted(known)) or 'none'}")


def source_entry(spec: ModelSpec, source_registry: str) -> dict:
    """The source model as a flat models.yaml entry for another file, its weights still found from there: a relative
    ``file:``/``dir:`` path is made absolute against the registry that holds it (``append_entry`` makes it relative
    to the new file again when it lies beside it); a package, parts, a tag or a path from an environment variable or
    ``~`` is the same from any file."""
    entry = spec.model_dump(mode="json", exclude={"name", "base", "variant", "weights"}, exclude_defaults=True)
    weights = spec.weights.model_dump(mode="json", exclude_none=True)
    kind = spec.weights.kind
    if kind in ("file", "dir") and not weights[kind].startswith(("$", "~")) and not Path(weights[kind]).is_absolute():
        weights[kind] = str(Path(source_registry).resolve().parent / weights[kind])
    entry.update(
        engine=spec.engine, weights=weights, quantization=spec.quantization, context_length=spec.context_length
    )
    return entry


def source_copy(models_file: Path, model: str, spec: ModelSpec, source_registry: str, new: str) -> dict[str, dict]:
    """What registering ``new`` in ``models_file`` adds before the new entry: nothing when the file holds the source,
    else a copy of the source's entry under the name it was asked by, so the file is self-contained (`rig compare M
    M-q8_0 --models new.yaml` can name both) and the source's weights still resolve. Checked before any work."""
    if Path(models_file).exists() and Path(models_file).resolve() == Path(source_registry).resolve():
        return {}
    if new == model:
        raise RegistryError(f"--name {new}: the source model's name; {models_file} gets a copy of it under that name")
    check_new_name(models_file, model)
    return {model: source_entry(spec, source_registry)}


def check_new_name(models_file: Path, name: str) -> None:
    """Refuse a name the models file already has (before any weights are written); a missing file has none."""
    if not Path(models_file).exists():
        return
    reg = load_registry(models_file)
    if name in reg.models or name in reg.defaults:
        raise RegistryError(f"{models_file}: models.{name} already exists")


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


def append_entry(models_file: Path, entries: dict[str, dict], *, check_only: bool = False) -> None:
    """Add ``models.<name>`` for each of ``entries`` to the models file, creating the file when it is missing.
    Appended as text so the user's comments and layout survive; the new text is read back through the registry
    before it replaces the file (atomically), so a file the append would break (``models:`` not the last key) is
    refused and left as it was. ``check_only``: the same text written beside the file and read back, nothing
    replaced or left, so a quantize knows before it writes a GGUF that the file can take its entry."""
    entries = copy.deepcopy(entries)  # the relative paths below are the file's, not the caller's
    for name, entry in entries.items():
        kind = next(iter(entry["weights"]))  # file (a GGUF), dir (a converted folder), or a path-independent kind
        if kind in ("file", "dir"):
            with contextlib.suppress(ValueError):  # keep the registry relocatable when the weights sit beside it
                entry["weights"][kind] = str(Path(entry["weights"][kind]).relative_to(models_file.resolve().parent))
        check_new_name(models_file, name)
    try:
        old = read_text(models_file, max_bytes=MAX_REGISTRY_BYTES) if models_file.exists() else None
    except InputError as e:
        raise RegistryError(str(e)) from None
    text = old.rstrip("\n") + "\n\n" if old is not None else "models:\n"
    block = yaml.safe_dump(entries, sort_keys=False)
    indented = "".join(f"  {line}\n" for line in block.splitlines())
    if check_only:
        _check_append(models_file, text + indented, list(entries))
        return
    models_file.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(models_file) as tmp:
        tmp.write_text(text + indented, encoding="utf-8")
        _reads_back(models_file, tmp, list(entries))


def _reads_back(models_file: Path, written: Path, names: list[str]) -> None:
    for name in names:
        try:
            load_registry(written).get(name)
        except RegistryError as e:
            msg = str(e).replace(str(written), str(models_file))
            raise RegistryError(f"{models_file}: not changed, models.{name} would not read back ({msg})") from None


def _check_append(models_file: Path, text: str, names: list[str]) -> None:
    """The appended text written in a temporary folder where the file's own temporary will be (its folder, or the
    nearest one that exists) and read back; the folder removed. RegistryError when it cannot be written there."""
    where = next(p for p in [models_file.parent, *models_file.parent.parents] if os.path.lexists(p))
    try:
        with tempfile.TemporaryDirectory(prefix=".rig-check-", dir=where) as tmp:
            trial = Path(tmp) / models_file.name
            trial.write_text(text, encoding="utf-8")
            _reads_back(models_file, trial, names)
    except OSError as e:
        raise RegistryError(f"{models_file}: cannot be written ({e.strerror}); nothing was made") from None
