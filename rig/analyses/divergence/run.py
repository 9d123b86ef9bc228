"""Running the divergence pass in a process of its own (``python -m rig.analyses.divergence SETTINGS.json``)."""

from __future__ import annotations

import sys
from pathlib import Path

from rig.analyses.divergence.compute import compute
from rig.analyses.divergence.output import divergence_md, read_report, write_report
from rig.analyses.divergence.records import (
    DivergenceError,
    DivergenceReport,
    DivergenceSettings,
    VariantSource,
    check_top_k,
)
from rig.interrupt import run_child, sigterm_as_interrupt
from rig.records import (
    DEFAULT_DIVERGENCE_TOP_K,
    read_record,
    write_record,
)


def run_divergence(
    cdir: Path, runs: list[Path], reference: str | None, models_file: Path | None, top_k: int = DEFAULT_DIVERGENCE_TOP_K
) -> str:
    """The divergence section of a comparison: the pass runs in its own process (models loaded and freed there),
    handed ``divergence-settings.json``; returns the markdown. ``top_k``: log-probabilities asked of a vLLM side per
    position. Raises DivergenceError on bad input."""
    import tempfile

    from rig.analyses.compare import variant_labels
    from rig.runfolder.folder import RunFolder

    check_top_k(top_k)
    labels = variant_labels(runs)
    models = [RunFolder(r).manifest.config.model.name for r in runs]
    i = 0
    if reference is not None:
        hits = [k for k, (lab, m) in enumerate(zip(labels, models, strict=True)) if reference in (lab, m)]
        if not hits:
            raise DivergenceError(f"--reference {reference!r}: not among the variants ({', '.join(labels)})")
        i = hits[0]
    settings = DivergenceSettings(
        reference_run=str(runs[i]),
        reference_label=labels[i],
        variants=[VariantSource(model=models[k], run=str(r), label=labels[k]) for k, r in enumerate(runs) if k != i],
        out=str(cdir),
        models_file=str(models_file) if models_file else None,
        top_k=top_k,
    )
    path = cdir / "divergence-settings.json"
    write_record(path, settings)
    with tempfile.TemporaryFile() as err:
        code, stopped = run_child([sys.executable, "-m", "rig.analyses.divergence", str(path)], stderr=err)
        if stopped:  # the pass stopped with this command and wrote nothing (its files are written whole at its end)
            raise KeyboardInterrupt
        err.seek(max(0, err.seek(0, 2) - 65536))  # its last lines say why it failed; not a traceback's whole output
        lines = [x for x in err.read().decode("utf-8", "replace").splitlines() if x.strip()]
    if code != 0:
        raise DivergenceError(lines[-1] if code == 2 and lines else f"the pass failed (exit {code})")
    return divergence_md(read_report(cdir))


def run(settings: DivergenceSettings) -> DivergenceReport:
    report = compute(settings)
    write_report(report, Path(settings.out))
    return report


def main(argv: list[str] | None = None) -> int:
    """``python -m rig.analyses.divergence SETTINGS.json``: the pass in a process of its own; exit 2 on bad input."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rig.analyses.divergence SETTINGS.json", file=sys.stderr)
        return 2
    try:
        settings = read_record(Path(args[0]), DivergenceSettings)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    try:
        with sigterm_as_interrupt():
            run(settings)
    except DivergenceError as e:
        print(str(e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # stopped with the command that started it: nothing written (written whole at the end)
        print("divergence pass stopped; nothing written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
