"""`rig models`: the registry, and new variants by quantizing or converting a GGUF."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table as RichTable

from rig.cli.common import app, cell, fail, out, say, stops_cleanly

models_app = typer.Typer(help="The model registry (models.yaml).", invoke_without_command=True)
app.add_typer(models_app, name="models")


@models_app.callback()
def models(
    ctx: typer.Context, models_file: Path | None = typer.Option(None, "--models", help="models.yaml to use.")
) -> None:
    """List the model registry and whether each model's weights are present."""
    if ctx.invoked_subcommand:
        return
    from rig.registry import RegistryError, load_registry, weights_present

    try:
        reg = load_registry(models_file)
    except RegistryError as e:
        fail(str(e))
    from rig.weight_parts import status

    t = RichTable(title=cell(f"models ({reg.path})", 2000))
    for c in ("name", "engine", "quant", "ctx", "weights", "present"):
        t.add_column(c)
    notes: list[str] = []
    for name, spec in reg.models.items():
        if spec.weights.parts is not None:
            st = status(spec.weights.parts)
            ok, present = st.state != "missing", PARTS_STATE[st.state]
            if not ok:
                notes.append(f"{name}: {st.detail}")
        else:
            ok, _detail = weights_present(spec, reg.path)
            present = "yes" if ok else "no"
        default = " (default)" if reg.defaults.get(spec.base) == name else ""
        t.add_row(
            *(
                cell(c)
                for c in (
                    name + default,
                    spec.engine,
                    spec.quantization,
                    spec.context_length,
                    f"{spec.weights.kind}: {spec.weights.ref}",
                )
            ),
            cell(present) if ok else f"[red]{cell(present)}[/]",
        )
    out.print(t)
    for note in notes:
        say(note, out)


# A model joined from part packages (rig.weight_parts): its state in the `present` column.
PARTS_STATE = {
    "assembled": "yes: assembled, verified",
    "installed": "yes: parts installed, assembled on first run",
    "missing": "no: parts missing",
}


MODELS_HELP = (
    "models.yaml to append the new entry to (created when missing; a copy of the source's entry is added when it "
    "lacks it); the source model is looked up there, else in the registry rig reads without --models, else in the "
    "one shipped with rig."
)


def _register(path: Path, copy: dict[str, dict], new: dict[str, dict], source_registry: str) -> None:
    """Append the new entry, after the source's copy when the file lacks the source (``rig.quantize.source_copy``)."""
    from rig.quantize import append_entry

    append_entry(path, copy | new)
    for name in copy:
        say(f"copied models.{name} from {source_registry} into {path}, so that the file names its source too")
    for name in new:
        say(f"added models.{name} to {path}")


@models_app.command("quantize")
def quantize(
    model: str = typer.Argument(..., help="Source model (a llama.cpp GGUF entry of --models or of rig's registry)."),
    to: str = typer.Option(..., "--to", help="Target quantization, e.g. q4_0, q8_0, q5_k_m."),
    out_path: Path | None = typer.Option(None, "--out", help="Output .gguf (default: weights/<name>.gguf)."),
    name: str | None = typer.Option(None, "--name", help="Name of the new models.yaml entry."),
    models_file: Path | None = typer.Option(None, "--models", help=MODELS_HELP),
    register: bool = typer.Option(True, "--register/--no-register", help="Append the new entry to models.yaml."),
) -> None:
    """Make a new GGUF variant with llama.cpp's quantize API and register it."""
    from rig.names import BadName, name_path
    from rig.quantize import (
        append_entry,
        check_new_name,
        find_source,
        ftype_for,
        quantize_gguf,
        source_copy,
        variant_entry,
    )
    from rig.registry import RegistryError, default_registry_path, resolve_weights

    try:
        path = models_file or default_registry_path()
        spec, source_registry = find_source(model, models_file)
        if spec.engine != "llamacpp":
            fail(f"{model}: quantize works on llama.cpp GGUF models, this one uses {spec.engine}")
        new = name or f"{spec.base}-{to.lower()}"
        ftype_for(to)  # every refusal before the source is read or anything is written
        default_dst = name_path(Path("weights"), new, ".gguf", "--name")  # a model name, and a file name
        copy = source_copy(Path(path), model, spec, source_registry, new) if register else {}
        dst = out_path or default_dst
        entry = {new: variant_entry(spec, to, dst.resolve())}
        if register:  # the file must take the entry before a GB is written (it was found after, the GGUF left)
            check_new_name(Path(path), new)
            append_entry(Path(path), copy | entry, check_only=True)
        with stops_cleanly("nothing written; run the command again"):  # joining a parts model's GGUF is long
            src = resolve_weights(spec, source_registry)
        t = time.perf_counter()
        with stops_cleanly(f"nothing written under {dst} or to {path}; run the command again"):
            quantize_gguf(src, dst.resolve(), to)
        say(f"wrote {dst} ({dst.stat().st_size / 2**20:.1f} MiB) in {time.perf_counter() - t:.1f}s")
        if register:
            try:
                _register(Path(path), copy, entry, source_registry)
            except BaseException:  # the file changed meanwhile: no GGUF is left that no entry names
                dst.unlink(missing_ok=True)
                raise
    except typer.Exit:  # a RuntimeError to click: fail's and stops_cleanly's exits pass through as they are
        raise
    except (RegistryError, RuntimeError, BadName) as e:
        fail(str(e))
    except OSError as e:
        fail(f"{e.filename or dst}: cannot write the quantized file ({e.strerror})")


@models_app.command("convert")
def convert(
    model: str = typer.Argument(..., help="Source model (a llama.cpp GGUF entry of --models or of rig's registry)."),
    to: str = typer.Option(..., "--to", help="Target format; only 'hf' (a Hugging Face folder for vLLM)."),
    out_path: Path | None = typer.Option(None, "--out", help="Output folder (default: under the rig cache)."),
    name: str | None = typer.Option(None, "--name", help="Name of the new models.yaml entry."),
    models_file: Path | None = typer.Option(None, "--models", help=MODELS_HELP),
    register: bool = typer.Option(True, "--register/--no-register", help="Append the new entry to models.yaml."),
) -> None:
    """Dequantize a GGUF into a bf16 Hugging Face folder and register it as a vLLM entry. Offline."""
    from rig.convert import ConvertError, check_extra, convert_gguf_to_hf, default_out_dir, hf_entry
    from rig.names import BadName, path_name
    from rig.quantize import check_new_name, find_source, source_copy
    from rig.registry import RegistryError, default_registry_path, resolve_weights

    if to != "hf":
        fail(f"--to {to!r}: only 'hf' is supported")
    try:
        check_extra()
        path = models_file or default_registry_path()
        spec, source_registry = find_source(model, models_file)
        if spec.engine != "llamacpp":
            fail(f"{model}: convert reads llama.cpp GGUF models, this one uses {spec.engine}")
        new = path_name(name or f"{spec.base}-hf", "--name")
        copy = source_copy(Path(path), model, spec, source_registry, new) if register else {}
        if register:
            check_new_name(Path(path), new)
        with stops_cleanly("nothing written; run the command again"):  # joining a parts model's GGUF is long
            src = Path(resolve_weights(spec, source_registry))
        dst = (out_path or default_out_dir(new, src)).resolve()
        t = time.perf_counter()
        with stops_cleanly(f"nothing written under {dst} or to {path}; run the command again"):
            convert_gguf_to_hf(src, dst, model=model)
        say(f"wrote {dst} in {time.perf_counter() - t:.1f}s")
        if register:
            _register(Path(path), copy, {new: hf_entry(spec, dst)}, source_registry)
    except (RegistryError, ConvertError, BadName) as e:
        fail(str(e))
    except OSError as e:
        fail(f"{e.filename or dst}: cannot write the converted folder ({e.strerror})")
