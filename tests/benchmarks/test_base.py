"""What every registered benchmark shares: typed options (unknown keys and bad values refused naming the option,
recorded with their defaults, read back from old and new manifests alike) and generated option help."""

from pathlib import Path

import pytest

from rig.benchmarks import BENCHMARKS, get_benchmark_class, options_markdown, recorded_options
from rig.benchmarks.base import DataError
from rig.runfolder.config import BenchmarkInfo

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_unknown_option_is_refused_naming_it(name: str) -> None:
    cls = get_benchmark_class(name)
    assert cls.Options.model_fields, f"{name} declares no options"
    with pytest.raises(DataError, match=rf"{name}: unknown option\(s\) \['colour'\]; known: "):
        cls(None, {"colour": "red"})
    with pytest.raises(DataError, match=rf"{name}: unknown option\(s\) \['colour'\]"):
        cls.parse_options({"colour": "red"})  # refused before any data is looked at


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_declared_options_are_accepted_by_name(name: str) -> None:
    """A declared key is never refused as unknown (values may still be checked)."""
    cls = get_benchmark_class(name)
    for key in cls.Options.model_fields:
        try:
            cls.parse_options({key: "1"})
        except DataError as e:
            assert "unknown option" not in str(e), (key, e)


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("callnavi", {"format": "xml"}, "callnavi option format: 'xml' is not one of json, yaml"),
        (
            "callnavi",
            {"paper_denominators": "maybe"},
            "callnavi option paper_denominators: 'maybe' is not true or false",
        ),
        ("evgeoqa", {"locations": "many"}, "evgeoqa option locations: 'many' is not an integer"),
        ("evgeoqa", {"max_steps": "0"}, r"evgeoqa option max_steps: 0 is below 1 \(must be at least 1\)"),
        ("evgeoqa", {"walk_radius_m": "wide"}, "evgeoqa option walk_radius_m: 'wide' is not a number"),
        ("mobilitybench", {"framework": "swarm"}, "mobilitybench option framework: 'swarm' is not one of react, plan"),
        ("mobilitybench", {"max_steps": "2"}, "mobilitybench option max_steps: 2 is below 3"),
        ("routeeval", {"max_tokens": "lots"}, "routeeval option max_tokens: 'lots' is not an integer"),
        ("routeeval", {"pack": ""}, "routeeval option pack: names no map pack"),
        ("urbangeo", {"judge_temperature": "3"}, "urbangeo option judge_temperature: must be within 0..2"),
        ("urbangeo", {"tasks": "DS,XX"}, r"urbangeo option tasks: unknown \['XX'\]"),
    ],
)
def test_bad_value_is_refused_naming_benchmark_and_option(name: str, options: dict, message: str) -> None:
    with pytest.raises(DataError, match=f"^{message}"):
        get_benchmark_class(name).parse_options(options)


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_options_coerce_strings_and_round_trip_through_the_manifest(name: str) -> None:
    """Defaults are part of the model; what a new manifest records validates back to the same model, and so do the
    strings an old manifest recorded."""
    cls = get_benchmark_class(name)
    defaults = cls.parse_options({})
    assert cls.parse_options(defaults.model_dump(mode="json")) == defaults
    int_key = next((k for k, f in cls.Options.model_fields.items() if f.annotation in (int, "int")), None)
    if int_key is not None:
        passed = cls.parse_options({int_key: "7"})
        assert getattr(passed, int_key) == 7
        info = BenchmarkInfo(name=name, version="1", data_path="gone", data_hash="x", options={int_key: "7"})
        assert recorded_options(info) == passed
        new = info.model_copy(update={"options": passed.model_dump(mode="json")})
        assert recorded_options(new) == passed


def test_list_options_split_commas_and_keep_lists() -> None:
    cls = get_benchmark_class("urbangeo")
    o = cls.parse_options({"tasks": "ds, pr", "modules": "reasoning"})
    assert o.tasks == ["DS", "PR"] and o.modules == ["reasoning"]
    assert cls.parse_options(o.model_dump(mode="json")) == o


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_readme_options_table_is_generated_from_the_model(name: str) -> None:
    """Every option is in the table with its default; each benchmark's README carries the current table
    (regenerate with `rig benchmarks --write-readmes`)."""
    md = options_markdown(name)
    for key in get_benchmark_class(name).Options.model_fields:
        assert f"| `{key}` |" in md
    readme = (REPO / "benchmarks" / name / "README.md").read_text(encoding="utf-8")
    assert md in readme, f"benchmarks/{name}/README.md: options table out of date"


def test_each_agentic_benchmark_names_the_call_forms_its_reference_reads() -> None:
    """Issue 35: the report's tool-call forms table reads these; a benchmark without calls names none."""
    from rig.records import CALL_FORMS

    def ref(name: str, **options: str) -> tuple[tuple[str, ...], str]:
        cls = get_benchmark_class(name)
        return cls.reference_calls(cls.parse_options(options))

    for name in ("callnavi", "evgeoqa", "mobilitybench", "routeeval"):
        forms, note = ref(name)
        assert forms and set(forms) <= set(CALL_FORMS) and note, name
    assert ref("evgeoqa")[0] == ("bare",) and ref("routeeval")[0] == ("native", "tagged")
    assert "fenced" in ref("mobilitybench", framework="react")[0]  # ReAct reads a ```json block or the first {...}
    assert ref("mobilitybench", framework="plan")[0] == ("native", "tagged")
    assert ref("urbangeo") == ((), "")


# -- benchmark data through the bounded reader (issue 37): a FIFO given as --data or inside the data folder is
# refused naming it (before, the open blocked for ever), /dev/zero is no file, a broken file names file and field.

_FIFOS = [
    ("callnavi", "sample", "Questions/maps.json"),
    ("callnavi", "sample", "APIs/maps.json"),
]


@pytest.fixture
def readers() -> tuple:
    """The data readers, imported before the test's deadline starts (imports are slow on a loaded host)."""
    from rig.benchmarks.base import read_json
    from rig.benchmarks.datahash import hash_paths
    from rig.benchmarks.evgeoqa.importer import ImportError_, read_lines
    from rig.benchmarks.mobilitybench.importer import load_upstream
    from rig.benchmarks.routeeval.data import load_prompt_pack

    return read_json, hash_paths, ImportError_, read_lines, load_upstream, load_prompt_pack


@pytest.mark.parametrize(("name", "sub", "rel"), _FIFOS)
def test_a_fifo_in_the_data_folder_is_refused_naming_it(
    tmp_path: Path, deadline: None, name: str, sub: str, rel: str
) -> None:
    import os
    import shutil

    root = tmp_path / name
    shutil.copytree(REPO / "benchmarks" / name / sub, root)
    (root / rel).unlink()
    os.mkfifo(root / rel)  # no writer: a blocking open never returns
    with pytest.raises(DataError, match=rf"{root / rel}: is a FIFO \(named pipe\), not a file"):
        get_benchmark_class(name)(root).episodes()


def test_the_data_readers_refuse_special_files(tmp_path: Path, readers: tuple, deadline: None) -> None:
    import os

    read_json, hash_paths, ImportError_, read_lines, load_upstream, load_prompt_pack = readers
    fifo, zero = tmp_path / "cases.csv", Path("/dev/zero")
    os.mkfifo(fifo)
    fifo_says, zero_says = "is a FIFO (named pipe), not a file", "is a character device, not a file"
    cases = [
        (read, path, says)
        for read in (read_json, load_prompt_pack)
        for path, says in ((fifo, fifo_says), (zero, zero_says))
    ]
    cases += [(lambda p: hash_paths([p]), fifo, fifo_says), (lambda p: hash_paths([p]), zero, zero_says)]
    cases += [(load_upstream, fifo, fifo_says), (load_upstream, zero, "expected a .csv or .xlsx")]  # by its suffix
    for read, path, says in cases:
        with pytest.raises(DataError) as e:
            read(path)
        assert str(e.value).startswith(f"{path}: ") and says in str(e.value), str(e.value)
    with pytest.raises(ImportError_, match=r"cases\.csv: is a FIFO"):
        read_lines(fifo)


def test_a_fifo_in_mobilitybench_s_data_folder_is_refused_naming_it(tmp_path: Path, deadline: None) -> None:
    """The store's content digest reads every data file first (the map pack is not needed to see it)."""
    import os
    import shutil

    from rig.benchmarks.mobilitybench.data import content_digest

    root = tmp_path / "mb"
    shutil.copytree(REPO / "benchmarks" / "mobilitybench", root)
    (root / "recorded.json").unlink()
    os.mkfifo(root / "recorded.json")
    with pytest.raises(DataError, match=rf"{root / 'recorded.json'}: is a FIFO"):
        content_digest(root, "sha")


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ('{"id": 1}\n' + "[" * 100_000 + "\n", "qa.jsonl:2: not valid JSON"),  # the parser's depth: no traceback
        ('{"id": 1}\n{"a": ' + "9" * 5000 + "}\n", "qa.jsonl:2: not valid JSON"),
        ('{"id": 1}\n' + "[" * 70 + "]" * 70 + "\n", "nested more than 64 deep"),
        ('{"id": 1}\n{"a": "x\u2028y\u0085z"}\n', [{"id": 1}, {"a": "x\u2028y\u0085z"}]),  # marks in a string
        ("[1, 2]", [1, 2]),
    ],
)
def test_evgeoqa_lines_name_the_line(tmp_path: Path, text: str, read: str | list[object]) -> None:
    from rig.benchmarks.evgeoqa.importer import ImportError_, read_lines

    path = tmp_path / "qa.jsonl"
    path.write_text(text, encoding="utf-8")
    if isinstance(read, list):
        assert [r for _, r in read_lines(path)] == read
        return
    with pytest.raises(ImportError_) as e:
        read_lines(path)
    assert read in str(e.value), str(e.value)
