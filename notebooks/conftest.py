"""pytest setup for running notebooks on their own, from any folder (`pytest 03_memory.ipynb`).

The same offline, key-free environment and network guard as tests/ (tests/offline_env.py): your own
.env or a live LABKIT_MODE never changes what the stored outputs are compared with. Not a lesson file.
"""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import offline_env  # noqa: E402

offline_env.apply()


def pytest_configure(config):
    # subtle: a path in pyproject's addopts is read from the current folder, which may be
    # notebooks/; name the sanitize file by its place in the repository
    if config.option.nbval_sanitize_with is None:
        config.option.nbval_sanitize_with = str(ROOT / "tests" / "sanitize.cfg")


def pytest_terminal_summary(terminalreporter, config):
    """A bare `pytest` in notebooks/ collects only the notebooks: say so, not silently."""
    bare = config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR  # no paths given
    if bare and config.invocation_params.dir == ROOT / "notebooks":
        terminalreporter.write_line(
            "note: run from notebooks/, pytest tested only the notebooks; the unit tests are in "
            "../tests — run `make test` from the repository root for both"
        )
