"""RunSpec is the one declaration of a run's settings: no module of rig keeps a list of its fields, and each
field's role (flag, --resume, run hash, sweep cell key) is declared on the field."""

from __future__ import annotations

import ast
from pathlib import Path

from rig.runfolder.config import RunConfig
from rig.runfolder.spec import FLAGS, RunSettings, RunSpec, axes, setting

RIG = Path(__file__).resolve().parents[2] / "rig"


def _names(node: ast.AST) -> set[str]:
    """The RunSpec field names a literal collection lists: the strings of a tuple, list or set, or the keys of a
    table about them (a dict of constants, like a flag per field; not a record of values, like a request body)."""
    if isinstance(node, ast.Dict) and not all(isinstance(v, ast.Constant) for v in node.values):
        return set()
    items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", [])
    return {i.value for i in items if isinstance(i, ast.Constant) and i.value in RunSpec.model_fields}


def test_no_module_lists_the_settings_again() -> None:
    """A list of RunSpec's fields elsewhere (a cell key's fields, the flags, what --resume skips) is a place a new
    setting has to be added by hand, and drifts when it is not."""
    found = []
    for path in sorted(RIG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) and len(names := _names(node)) >= 3:
                found.append(f"{path.relative_to(RIG.parent)}:{node.lineno}: {sorted(names)}")
    assert found == []


def test_the_scan_sees_a_list_of_settings() -> None:
    tree = ast.parse('KEY = ("model", "decode", "tool_mode")\nFLAGS = {"limit": "-l", "gpu": "-g", "seed": "-s"}\n')
    assert [len(_names(n)) for n in ast.walk(tree) if isinstance(n, ast.Tuple | ast.Dict)] == [3, 3]
    body = ast.parse('body = {"model": name, "seed": s.seed, "max_tokens": n}')  # a record of values, not a list
    assert [_names(n) for n in ast.walk(body) if isinstance(n, ast.Dict)] == [set()]


def test_flags_are_derived_from_the_field_names() -> None:
    assert FLAGS["max_tokens"] == "--max-tokens" and FLAGS["tool_mode"] == "--tool-mode"
    assert FLAGS["options"] == "--option" and FLAGS["models_file"] == "--models"  # declared on those fields
    assert set(FLAGS) == set(RunSpec.model_fields)


def test_a_run_config_records_every_run_setting() -> None:
    """A new RunSettings field is recorded and hashed by RunConfig without an edit there."""
    assert set(RunSettings.model_fields) < set(RunConfig.model_fields)
    assert set(RunConfig.model_fields) - set(RunSettings.model_fields) == {"model", "benchmarks"}


# The settings of the first rigs, hashed and keyed always (a null included); any setting added since must declare
# `when_set`, so that it enters run hashes and sweep cell keys only when set and earlier runs and sweeps still match.
FIRST_HASHED = {"decode", "tool_mode", "temperature", "seed", "max_tokens", "repeats", "limit", "gpu"}
FIRST_KEYED = {"model", "benchmark", "options", "data", "decode", "tool_mode", "repeats", "limit", "seed"}
FIRST_KEYED |= {"max_tokens", "temperature", "models_file"}


def test_a_setting_added_later_enters_hashes_and_keys_only_when_set() -> None:
    for name, f in RunSpec.model_fields.items():
        role = setting(f)
        earlier = name in FIRST_HASHED if name in RunSettings.model_fields else name in FIRST_KEYED
        assert role.when_set or (role.per_job and name in FIRST_HASHED) or earlier, name


def test_the_axes_are_the_choices_among_the_run_settings() -> None:
    assert axes() == ("decode", "tool_mode")


def test_pass_k_within_repeats_in_flags_and_files(tmp_path: Path) -> None:
    """--pass-k takes a comma list; a k outside 1..repeats is refused naming the flag, and in a spec file the file."""
    import json
    import re

    import pytest

    from rig.runfolder.spec import SpecError, make_spec, pass_ks, read_spec

    assert make_spec({"repeats": 5, "pass_k": "5,1,3"}, RunSpec).pass_k == [5, 1, 3]
    assert pass_ks([5, 1, 3], 5) == [1, 3, 5] and pass_ks(None, 4) == [1, 3, 4] and pass_ks(None, 1) == [1]
    with pytest.raises(SpecError, match=r"^--pass-k 1,6: k = 6 is outside 1 to --repeats 5$"):
        make_spec({"repeats": 5, "pass_k": "1,6"}, RunSpec)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"repeats": 2, "pass_k": [3]}))
    with pytest.raises(
        SpecError, match="^" + re.escape(f"{spec}: --pass-k 3: k = 3 is outside 1 to --repeats 2") + "$"
    ):
        read_spec(spec)
