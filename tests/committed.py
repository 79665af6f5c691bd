"""The notebooks as the repository holds them: what `make test` checks (nbval and hygiene).

Running, saving or autosaving a notebook in JupyterLab changes its working file; the tests read
the version in git's index instead (what the last commit holds, plus anything `git add`ed) and
name the working notebooks that differ, in one line. Outside a git checkout (a tarball) the
working files are all there is, and are tested as they are.
"""

import functools
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
COPIES = ROOT / ".runtime" / "committed"  # git-ignored; the same path in every pytest worker


def _git(*args) -> str | None:
    """git's output, or None when there is no git or this is not a checkout."""
    try:
        run = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return run.stdout if run.returncode == 0 else None


@functools.cache
def differing() -> dict:
    """{working notebook path: "edited" | "not in git"}; empty in a clean checkout or a tarball."""
    top = _git("rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != ROOT:
        return {}
    found = {}
    for why, args in (
        ("edited", ("diff", "--name-only", "-z", "--relative", "--", "notebooks")),
        ("not in git", ("ls-files", "--others", "--exclude-standard", "-z", "--", "notebooks")),
    ):
        for name in (_git(*args) or "").split("\0"):
            if name.endswith(".ipynb"):
                found[(ROOT / name).resolve()] = why
    return found


def tested(paths) -> list:
    """The notebooks the repository holds (a notebook git does not know is left out)."""
    return [p for p in paths if differing().get(Path(p).resolve()) != "not in git"]


def text(path) -> str:
    """The notebook as git holds it: the index's version when the working file was edited."""
    path = Path(path).resolve()
    if differing().get(path) == "edited":
        held = _git("show", f":{path.relative_to(ROOT).as_posix()}")
        if held is not None:
            return held
    return path.read_text(encoding="utf-8")


def copy(path) -> Path:
    """A file holding text(path), under COPIES (written whole, so parallel workers agree)."""
    target = COPIES / Path(path).resolve().relative_to(ROOT)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    partial.write_text(text(path), encoding="utf-8")
    os.replace(partial, target)
    return target


def summary() -> str:
    """One line naming the working notebooks that differ, or "" when none does."""
    if not differing():
        return ""
    names = ", ".join(
        f"{p.name}" + (" (not in git)" if why == "not in git" else "")
        for p, why in sorted(differing().items())
    )
    return (
        f"notebooks: tested as git holds them; your working copies differ and were not tested: "
        f"{names} (git add one to test your version, git checkout -- notebooks/NAME to drop it)"
    )
