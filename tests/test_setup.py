"""Set-up: every pin installs on the oldest Python labkit accepts, and the Makefile's venv logic.

The Makefile runs with stand-in Pythons in a temporary copy, so nothing big is installed. A
stand-in answers `-c` with the real Python told to report another version, and fakes `-m venv`
(a folder whose bin/python is the stand-in), `-m pip` and `-m pytest` (logged, not run; `pip show`
prints the torch version in $TORCH_SHOWN, as if that torch were installed).
"""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent
REQUIRES_PYTHON = SpecifierSet(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
)
FLOOR = next(s.version for s in REQUIRES_PYTHON if s.operator == ">=")  # "3.11": 3.11.0
PINS = [
    Requirement(line)
    for line in (ROOT / "requirements-lock.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
STAND_IN = """#!/bin/sh
# A stand-in for Python {version}.
case "$1" in
  -V) echo "Python {version}" ;;
  -c) exec "{real}" -c "import sys; sys.version_info = {info}; sys.version = '{version} (stand-in)'
sys.base_prefix = '/stand-in/{version}'
$2" ;;
  -m) echo "$0 $*" >> "{log}"
      case "$2" in
        venv) mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
        pip) [ -z "$PIP_FAILS" ] && {{ [ "$3" != show ] || [ -z "$TORCH_SHOWN" ] ||
               echo "Version: $TORCH_SHOWN"; }} ;;
      esac ;;
esac
"""


@pytest.mark.parametrize("pin", PINS, ids=str)
def test_every_pin_installs_on_the_oldest_python_labkit_accepts(pin):
    """What pip checks before installing, read from the installed package (no network)."""
    installed = importlib.metadata.distribution(pin.name)
    assert installed.version in pin.specifier, f"installed {installed.version}: rebuild the venv"
    needs = SpecifierSet(installed.metadata.get("Requires-Python") or "")
    assert FLOOR in needs, f"{pin} needs Python {needs}: hold it back in requirements.txt"


# what `make test` runs once .venv is ready: pytest on every core, a notebook on one worker, no
# soak trials (the stand-in Python logs its argv joined, so the quotes are gone)
PYTEST = ".venv/bin/python -m pytest -n auto --dist loadfile -m not soak"


@pytest.fixture
def repo(tmp_path):
    """A copy of what the Makefile reads, and a way to make stand-in Pythons."""
    for name in ("Makefile", "requirements-lock.txt", "pyproject.toml", ".ci/bfcl-eval.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def python(repo, version):
    """Write a stand-in for Python `version`; return its path."""
    info = tuple(int(part) for part in version.split(".")) + ("final", 0)
    path = repo / f"python{version}"
    path.write_text(
        STAND_IN.format(version=version, real=sys.executable, info=info, log=repo / "log")
    )
    path.chmod(0o755)
    return path


def make(repo, py, **env):
    """`make test PY=py` in the copy: (exit code, what it printed, the -m commands it ran)."""
    (repo / "log").write_text("")
    clean = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    run = subprocess.run(
        ["make", "--no-print-directory", "test", f"PY={py}"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
    )
    return run.returncode, run.stdout + run.stderr, (repo / "log").read_text().splitlines()


def venv_version(repo):
    return subprocess.run(
        [repo / ".venv" / "bin" / "python", "-V"], capture_output=True, text=True
    ).stdout.strip()


@pytest.mark.parametrize("version", ["3.9.18", "3.10.12", "3.11.0", "3.11.2", "3.11.4", "3.13.1"])
def test_make_accepts_exactly_the_pythons_pyproject_accepts(repo, version):
    code, out, ran = make(repo, python(repo, version))
    if version in REQUIRES_PYTHON:
        assert code == 0, out
        assert ran[-1] == PYTEST and venv_version(repo) == f"Python {version}"
    else:
        assert code != 0 and not (repo / ".venv").exists()
        assert f"is Python {version}." in out and "make test PY=python3.12" in out


def test_a_venv_made_by_a_python_that_fails_the_check_is_rebuilt(repo):
    subprocess.run([python(repo, "3.10.12"), "-m", "venv", ".venv"], cwd=repo, check=True)
    py = python(repo, "3.12.1")
    code, out, ran = make(repo, py)
    assert code == 0, out
    assert ".venv was made by Python 3.10.12 /stand-in/3.10.12: rebuilding it" in out
    assert venv_version(repo) == "Python 3.12.1" and f"{py} -m venv .venv" in ran


def test_a_half_finished_install_is_finished_in_the_same_venv(repo):
    py = python(repo, "3.12.1")
    code, out, _ = make(repo, py, PIP_FAILS="1")
    assert code != 0 and "did not finish" in out and "make test again: it resumes" in out
    assert not (repo / ".venv" / ".labkit-installed").exists()
    (repo / ".venv" / "kept").write_text("")
    code, out, ran = make(repo, py)
    assert code == 0, out
    assert (repo / ".venv" / "kept").exists() and "rebuilding" not in out
    assert ".venv/bin/python -m pip install --quiet -r requirements-lock.txt" in ran
    assert ran[-1] == PYTEST


def test_a_finished_venv_is_used_as_it_is(repo):
    py = python(repo, "3.12.1")
    assert make(repo, py)[0] == 0
    code, _, ran = make(repo, py)
    assert code == 0 and ran == [PYTEST]


def test_a_venv_whose_python_no_longer_runs_is_rebuilt(repo):
    py = python(repo, "3.12.1")
    assert make(repo, py)[0] == 0
    (repo / ".venv" / "bin" / "python").write_text("#!/bin/sh\nexit 127\n")  # its Python is gone
    code, out, ran = make(repo, py)
    assert code == 0, out
    assert ".venv was made by Python that no longer runs: rebuilding it" in out
    assert venv_version(repo) == "Python 3.12.1" and ran[-1] == PYTEST


TORCH = next(pin for pin in PINS if pin.name == "torch")
PINNED = next(iter(TORCH.specifier)).version  # "2.13.0"
TORCH_FIRST = (
    ".venv/bin/python -m pip install --quiet --retries 1 --extra-index-url https://download.pytorch.org/whl/cpu"
    f" -c requirements-lock.txt {TORCH}"
)
LOCK = ".venv/bin/python -m pip install --quiet -r requirements-lock.txt"


@pytest.mark.parametrize(
    "host, installed, first",
    [
        ("Linux", "", True),  # a new .venv: the CPU build first, never PyPI's CUDA one
        ("Linux", "2.12.1", True),  # another version: replaced by the pinned CPU build
        ("Linux", f"{PINNED}+cpu", False),
        ("Linux", PINNED, False),  # the pin, however it came
        ("Darwin", "", False),  # PyPI's macOS (and Windows) wheels are CPU builds already
    ],
    ids=["linux, new venv", "linux, other torch", "linux, cpu torch", "linux, torch", "macos"],
)
def test_on_linux_torch_comes_from_the_cpu_index_unless_the_pin_is_installed(
    repo, host, installed, first
):
    code, out, ran = make(repo, python(repo, "3.12.1"), HOST_OS=host, TORCH_SHOWN=installed)
    assert code == 0, out
    assert (TORCH_FIRST in ran) == first
    assert ("the CPU build, from https://download.pytorch.org/whl/cpu" in out) == first
    if first:  # before the lock, so the lock finds its torch pin already met
        assert ran.index(TORCH_FIRST) < ran.index(LOCK)
    assert "--no-deps" not in " ".join(line for line in ran if "torch" in line)  # resolved
