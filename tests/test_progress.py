import pytest

from rig.progress import progress


def test_an_items_bar_counts_done_of_total_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("replies", 3) as bar:
        bar.advance()
        bar.advance(2)
    cap = capsys.readouterr()
    assert "replies" in cap.err and "3/3" in cap.err and cap.out == ""


def test_update_sets_the_total_learned_late(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("writing results") as bar:  # rescore learns the count only once the file is read
        bar.update(4, 9)
    assert "4/9" in capsys.readouterr().err


def test_a_bytes_bar_shows_sizes_and_terminal_only_draws_nothing_off_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with progress("hashing", 2_000_000, unit="bytes") as bar:
        bar.advance(2_000_000)
    assert "2.0 MB" in capsys.readouterr().err
    with progress("hashing", 10, unit="bytes", terminal_only=True) as bar:
        bar.advance(10)
    assert capsys.readouterr().err == ""  # captured stderr is not a terminal


def test_a_label_from_a_file_name_is_shown_as_written_not_read_as_markup(capsys: pytest.CaptureFixture[str]) -> None:
    with progress("joining [/x][bold]w.gguf", 1) as bar:  # an unmatched closing tag raised MarkupError
        bar.advance()
    assert "joining [/x][bold]w.gguf" in capsys.readouterr().err
