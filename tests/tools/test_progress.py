"""Progress bars (autobatch.progress): tqdm on a terminal, nothing anywhere else; the
bench and the examples' training loops use it."""
import importlib.util
import io
import pathlib

import pytest

from autobatch import progress as progress_module
from autobatch.progress import Quiet, progress

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_not_a_terminal_is_quiet():
    out = io.StringIO()
    bar = progress(range(3), desc="x", file=out)
    assert isinstance(bar, Quiet)
    assert list(bar) == [0, 1, 2]
    bar.update()
    bar.set_postfix_str("text")
    bar.set_description("y")
    bar.close()
    assert out.getvalue() == ""


def test_a_terminal_gets_a_tqdm_bar():
    tqdm = pytest.importorskip("tqdm")
    out = FakeTerminal()
    with progress(total=4, desc="training", unit="batch", file=out) as bar:
        assert isinstance(bar, tqdm.tqdm)
        bar.update(2)
        bar.set_postfix_str("step 2")
    assert "training" in out.getvalue() and "step 2" in out.getvalue()


def test_without_tqdm_a_terminal_is_quiet_too(monkeypatch):
    monkeypatch.setattr(progress_module, "_tqdm", lambda: None)
    out = FakeTerminal()
    assert list(progress(iter("ab"), file=out)) == ["a", "b"]
    assert out.getvalue() == ""


def test_disable_wins():
    assert isinstance(progress([1], file=FakeTerminal(), disable=True), Quiet)


def test_an_object_without_isatty_is_quiet():
    class Sink:
        def write(self, s):
            raise AssertionError("nothing may be written")
    assert list(progress([1, 2], file=Sink())) == [1, 2]


def tagger():
    spec = importlib.util.spec_from_file_location("progress_tagger", EXAMPLES / "bilstm_tagger.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TINY = ["--epochs", "1", "--n-train", "16", "--n-dev", "4", "--batch-size", "8", "--hidden", "8",
        "--word-dim", "8"]


def test_example_training_is_quiet_in_a_log(capsys):
    tagger().main(TINY)
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "epoch 1" in captured.out


def test_example_training_shows_a_bar_on_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    tagger().main(TINY)
    assert "epoch 1" in terminal.getvalue() and "batch" in terminal.getvalue()


def test_bench_is_quiet_when_stderr_is_not_a_terminal(capsys):
    from autobatch.bench import run
    run.main(["--task", "lm", "--strategy", "agenda", "--batch-size", "2", "--hidden", "8",
              "--steps", "1", "--no-torch"])
    assert capsys.readouterr().err == ""


def test_bench_draws_its_bar_on_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")
    from autobatch.bench import run
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    run.main(["--task", "lm", "--strategy", "agenda", "--batch-size", "2", "--hidden", "8",
              "--steps", "1", "--no-torch"])
    text = terminal.getvalue()
    assert "bench" in text and "/2 " in text and "lm h=8 B=2" in text
