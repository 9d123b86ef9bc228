"""`rig models quantize`: a new GGUF variant from an existing one, through llama.cpp's quantize API, registered in
a models.yaml (created when missing). `rig models convert` registers its folders through the same functions."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from rig.inputs import InputError, read_text
from rig.records import atomic_path
from rig.registry import MAX_REGISTRY_BYTES, ModelSpec, RegistryError, default_registry_path, load_registry


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


def find_source(model: str, models_file: Path | None) -> tuple[ModelSpec, str]:
    """The model to quantize or convert, and the registry path its weights resolve against: in ``models_file`` when
    that exists and names it (a broken file is a RegistryError naming file and field), else in the registry `rig`
    reads without ``--models`` (``$RIG_MODELS``, ./models.yaml or the shipped one), so a new file can be started from
    a built-in model."""
    default = default_registry_path()
    if models_file is None or Path(models_file).resolve() == default.resolve():
        reg = load_registry(default)
        return reg.get(model), reg.path
    known: set[str] = set()
    if Path(models_file).exists():
        reg = load_registry(models_file)
        if model in reg.models or model in reg.defaults:
            return reg.get(model), reg.path
        known = set(reg.models) | set(reg.defaults)
    base = load_registry(default)
    if model in base.models or model in base.defaults:
        return base.get(model), base.path
    known |= set(base.models) | set(base.defaults)
    raise RegistryError(f"no model named {model!r} in {models_file} or {base.path}. Known: {', '.join(sorted(known))}")


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


def append_entry(models_file: Path, name: str, entry: dict) -> None:
    """Add ``models.<name>`` to the models file, creating the file when it is missing. Appended as text so the user's
    comments and layout survive; the new text is read back through the registry before it replaces the file
    (atomically), so a file the append would break (``models:`` not the last key) is refused and left as it was."""
    kind = next(iter(entry["weights"]))  # file (a GGUF) or dir (a converted folder)
    w = Path(entry["weights"][kind])
    with contextlib.suppress(ValueError):  # keep the registry relocatable when the weights sit beside it
        entry["weights"][kind] = str(w.relative_to(models_file.resolve().parent))
    check_new_name(models_file, name)
    try:
        old = read_text(models_file, max_bytes=MAX_REGISTRY_BYTES) if models_file.exists() else None
    except InputError as e:
        raise RegistryError(str(e)) from None
    text = old.rstrip("\n") + "\n\n" if old is not None else "models:\n"
    block = yaml.safe_dump({name: entry}, sort_keys=False)
    indented = "".join(f"  {line}\n" for line in block.splitlines())
    models_file.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(models_file) as tmp:
        tmp.write_text(text + indented, encoding="utf-8")
        try:
            load_registry(tmp).get(name)
        except RegistryError as e:
            msg = str(e).replace(str(tmp), str(models_file))
            raise RegistryError(f"{models_file}: not changed, models.{name} would not read back ({msg})") from None
