"""What every registered benchmark shares: option checking."""

import pytest

from rig.benchmarks import BENCHMARKS, get_benchmark_class
from rig.benchmarks.base import DataError


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_unknown_option_is_refused_naming_it(name: str) -> None:
    cls = get_benchmark_class(name)
    assert cls.OPTIONS, f"{name} declares no options"
    with pytest.raises(DataError, match=rf"{name}: unknown option\(s\) \['colour'\]; known: "):
        cls(None, {"colour": "red"})


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_declared_options_are_accepted_by_name(name: str) -> None:
    """A key in OPTIONS is never refused as unknown (values may still be checked)."""
    cls = get_benchmark_class(name)
    for key in cls.OPTIONS:
        try:
            cls(None, {key: "1"})
        except DataError as e:
            assert "unknown option" not in str(e), (key, e)
