"""Library code reports through logging (logger "autobatch" and its children) and
warnings (categories a user can filter), not print(): only the functions whose job is to
print do."""
import logging
import pathlib
import re
import warnings

import pytest

import autobatch as dy
from autobatch import distributed as dist

PACKAGE = pathlib.Path(dy.__file__).resolve().parent

# (file, the line's text): output that is the function's purpose
PRINTS_ON_PURPOSE = {
    ("report.py", "print(format_config(), file=file or sys.stdout)"),        # show_config
    ("engine/stats.pyx", 'print(f"#{bi:<5d} {op_name(v, first):<22s} x{n:<4d} sig={v.nodes[first].sig:<5d} "'),
    ("model/trainers.py", 'sys.stderr.write(f"[lr={self.learning_rate:g} clips={self._clips_since_status} "'),
}


def library_files():
    """The library's own code: not the bench (a command-line tool) nor generated C."""
    for path in sorted(PACKAGE.glob("*")):
        if path.suffix in (".py", ".pyx", ".pxi") and path.name != "__main__.py":
            yield path


def test_library_code_does_not_print():
    found = []
    for path in library_files():
        in_docstring = False
        for line in path.read_text().splitlines():
            text = line.strip()
            quotes = text.count('"""')
            if in_docstring or quotes:          # examples in docstrings may print
                in_docstring = in_docstring != (quotes % 2 == 1)
                continue
            if text.startswith("#"):
                continue
            if re.search(r"(?<![\w.])print\(|sys\.(stdout|stderr)\.write\(", text) \
                    and (path.name, text) not in PRINTS_ON_PURPOSE:
                found.append(f"{path.name}: {text}")
    assert not found, "use logging.getLogger('autobatch...') or warnings.warn:\n" + "\n".join(found)


def test_deprecated_update_epoch_warns_with_a_filterable_category():
    pc = dy.ParameterCollection()
    pc.add_parameters(2)
    trainer = dy.SimpleSGDTrainer(pc)
    with pytest.warns(DeprecationWarning, match="update_epoch"):
        trainer.update_epoch()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        trainer.update_epoch()                    # filtered: silent, no error


def test_loggers_are_children_of_autobatch(caplog):
    with caplog.at_level(logging.INFO, logger="autobatch"):
        dist.init(abort_on_error=False)
    records = [r for r in caplog.records if r.name == "autobatch.distributed"]
    assert records and "rank 0 of 1" in records[0].getMessage()


def test_debug_messages_of_save(caplog, tmp_path):
    pc = dy.ParameterCollection()
    pc.add_parameters(3)
    with caplog.at_level(logging.DEBUG, logger="autobatch"):
        dy.save(str(tmp_path / "m"), [pc])
    assert any(r.name == "autobatch.io.autobatch_save" and "saving" in r.getMessage()
               for r in caplog.records)
