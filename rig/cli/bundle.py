"""`rig bundle create / verify / install`: rig, weights, data and map packs carried across the air gap."""

from __future__ import annotations

from pathlib import Path

import typer

from rig.cli.common import DEFAULT_MODEL, app, csv_list, err, fail, out, say, stops_cleanly

bundle_app = typer.Typer(
    help="Carry rig, weights, data and map packs to a machine with no network, verified.", no_args_is_help=True
)
app.add_typer(bundle_app, name="bundle")


@bundle_app.command("create")
def bundle_create(
    out_dir: Path = typer.Argument(..., help="New folder for the bundle."),
    models_csv: str = typer.Option(
        DEFAULT_MODEL, "--models", help="models.yaml entries, comma-separated (a base name brings its variants)."
    ),
    benchmarks_csv: str | None = typer.Option(None, "--benchmarks", help="Comma-separated (default: all)."),
    extras_csv: str = typer.Option("llamacpp", "--extras", help="rig extras (engines), comma-separated."),
    python: str | None = typer.Option(None, "--python", help="Target Python, e.g. 3.11 (default: this one)."),
    plat: str | None = typer.Option(
        None, "--platform", help="Target pip platform tag(s), e.g. manylinux_2_28_x86_64 (default: here)."
    ),
    models_file: Path | None = typer.Option(None, "--models-file", help="models.yaml to read entries from."),
    wheels: bool = typer.Option(
        True, "--wheels/--no-wheels", help="Collect wheels with pip (needs an index or --find-links)."
    ),
    build: bool = typer.Option(
        True, "--build/--no-build", help="Compile source-only packages here when the target is this machine."
    ),
    requires: list[str] = typer.Option(
        [],
        "--require",
        help="Extra requirement installed beside rig (repeatable), e.g. torch==2.13.0 for a CPU torch.",
    ),
    find_links: list[Path] = typer.Option([], "--find-links", help="Local wheel folder for pip (repeatable)."),
    no_index: bool = typer.Option(False, "--no-index", help="pip uses --find-links only."),
    maps: bool = typer.Option(True, "--maps/--no-maps", help="Include the built map packs the benchmarks use."),
    data: list[str] = typer.Option(
        [],
        "--data",
        help="NAME=PATH: a chosen benchmark's own data folder or file, checked and bundled instead of its "
        "embedded data (repeatable).",
    ),
    sign: Path | None = typer.Option(
        None, "--sign", help="Ed25519 private key (ssh-keygen -t ed25519, or `rig bundle keygen`): signs MANIFEST.json."
    ),
) -> None:
    """Make a bundle: wheels, weights, models.yaml, benchmark data, map packs, MANIFEST.json, README; print its id."""
    from rig import plugins
    from rig.bundle import BundleError, CreateOptions, create, parse_data_flags

    try:
        user_data = parse_data_flags(data)
    except BundleError as e:
        fail(str(e))
    opts = CreateOptions(
        out=out_dir,
        models=csv_list(models_csv),
        extras=csv_list(extras_csv),
        requires=requires,
        python=python,
        platform=plat,
        benchmarks=csv_list(benchmarks_csv) if benchmarks_csv else sorted(plugins.own(plugins.BENCHMARK_GROUP)),
        models_file=models_file,
        wheels=wheels,
        build=build,
        find_links=find_links,
        no_index=no_index,
        maps=maps,
        data=user_data,
        sign=sign,
    )
    try:
        with stops_cleanly(f"no bundle written to {out_dir}; run the command again"):
            man = create(opts)
    except BundleError as e:
        fail(str(e))
    for note in man.not_copied:
        err.print(f"[yellow]not copied:[/] {note}", highlight=False, soft_wrap=True)
    size = sum(f.size for f in man.files)
    out.print(f"bundle {man.bundle_id}: {len(man.files)} files, {size / 1e6:.1f} MB in {out_dir}")
    # The id proves nothing if it travels inside the bundle: whoever can change a file can re-hash the manifest.
    say(
        f"carry the id to the lab apart from the bundle; there: rig bundle verify BUNDLE --expect {man.bundle_id}"
        + (f" --key {sign}.pub (signed: {out_dir / 'MANIFEST.json.sig'})" if sign else "")
    )


@bundle_app.command("keygen")
def bundle_keygen(
    key: Path = typer.Argument(..., help="New private key file; the public key is written beside it as KEY.pub."),
) -> None:
    """Make an Ed25519 key pair for `rig bundle create --sign KEY` and `verify/install --key KEY.pub`."""
    from rig.bundle import BundleError
    from rig.bundle.sign import keygen

    try:
        public, fingerprint = keygen(key)
    except BundleError as e:
        fail(str(e))
    say(f"private key {key} (keep it off the lab side); public key {public}: {fingerprint}", out)


_EXPECT_HELP = "The bundle id `rig bundle create` printed, carried apart from the bundle: any other is refused."
_KEY_HELP = "Public key (ssh-ed25519 line or PEM): MANIFEST.json.sig must be its signature."


@bundle_app.command("verify")
def bundle_verify(
    bundle: Path = typer.Argument(..., help="Bundle folder."),
    expect: str | None = typer.Option(None, "--expect", help=_EXPECT_HELP),
    key: Path | None = typer.Option(None, "--key", help=_KEY_HELP),
) -> None:
    """Check the manifest (its id, --expect, --key), then re-hash every file; name missing, extra, altered files and
    anything not a regular file (exit 2). Prints the bundle id computed from the manifest."""
    from rig.bundle import BundleError, verify

    try:
        rep = verify(bundle, expect=expect, key=key)
    except BundleError as e:
        fail(str(e))
    for kind, paths in (("missing", rep.missing), ("extra", rep.extra), ("altered", rep.altered)):
        for p in paths:
            say(f"{kind}: {bundle / p}")
    for line in rep.unsafe:
        say(f"not a regular file: {bundle}/{line}")
    for line in rep.problems:
        say(f"manifest: {line}")
    if not rep.ok:
        fail(f"bundle {rep.bundle_id}: does not verify ({rep.summary()})")
    signed = f", signature by {rep.signed_by}" if rep.signed_by else ""
    expected = " (the id expected)" if expect else ""
    say(f"bundle {rep.bundle_id}{expected}: {rep.checked} files verified{signed}", out)


@bundle_app.command("install")
def bundle_install(
    bundle: Path = typer.Argument(..., help="Bundle folder."),
    venv: Path = typer.Option(..., "--venv", help="New virtual environment to create."),
    extras_csv: str | None = typer.Option(None, "--extras", help="Extras to install (default: the bundle's)."),
    expect: str | None = typer.Option(None, "--expect", help=_EXPECT_HELP),
    key: Path | None = typer.Option(None, "--key", help=_KEY_HELP),
) -> None:
    """Verify the bundle (nothing of it runs before), create a venv from its wheels alone (no index), then run
    `rig doctor` on the bundle's registry."""
    from rig.bundle import BundleError, bundle_env, install

    try:
        extras = csv_list(extras_csv) if extras_csv is not None else None
        code = install(bundle, venv, extras, expect=expect, key=key)
    except BundleError as e:
        fail(str(e))
    env = " ".join(f"{k}={v}" for k, v in bundle_env(bundle).items())
    out.print(f"installed into {venv}; run with: {env} {venv}/bin/rig bench", highlight=False, soft_wrap=True)
    if code:
        raise typer.Exit(code)
