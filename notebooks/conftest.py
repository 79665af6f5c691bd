"""pytest setup for running notebooks on their own, from any folder (`pytest 03_memory.ipynb`).

The same offline, key-free environment and network guard as tests/ (tests/offline_env.py): your
own .env or a live LABKIT_MODE never changes what the stored outputs are compared with. Not a lesson
file.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import committed  # noqa: E402
import kernels  # noqa: E402
import offline_env  # noqa: E402

offline_env.apply()
kernels.install()  # a kernel that dies while starting (a port taken) is started again


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    """nbval tests each notebook as git holds it (tests/committed.py): a notebook a learner ran,
    saved or autosaved is replaced by its committed copy; one git does not know is left out."""
    collected = yield
    why = committed.differing().get(file_path.resolve())
    if why is None or file_path.suffix != ".ipynb":
        return collected
    if why == "not in git":
        return []
    from nbval.plugin import IPyNbFile

    class CommittedNotebook(IPyNbFile):
        """nbval's notebook, its cells read from git's copy; its kernel still starts here."""

        def collect(self):
            working, self.path = self.path, committed.copy(file_path)
            try:
                return list(super().collect())
            finally:
                self.path = working

    return [
        CommittedNotebook.from_parent(parent, path=file_path)
        if isinstance(node, IPyNbFile)
        else node
        for node in collected
    ]


def pytest_configure(config):
    # subtle: a path in pyproject's addopts is read from the current folder, which may be
    # notebooks/; name the sanitize file by its place in the repository
    if config.option.nbval_sanitize_with is None:
        config.option.nbval_sanitize_with = str(ROOT / "tests" / "sanitize.cfg")


def pytest_terminal_summary(terminalreporter, config):
    """Which working notebooks were not tested; and a bare `pytest` in notebooks/ collects only
    the notebooks: say so, not silently."""
    if committed.summary():
        terminalreporter.write_line(committed.summary())
    bare = config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR  # no paths given
    if bare and config.invocation_params.dir == ROOT / "notebooks":
        terminalreporter.write_line(
            "note: run from notebooks/, pytest tested only the notebooks; the unit tests are in "
            "../tests — run `make test` from the repository root for both"
        )
