"""The README tells the truth about the files and commands it names."""

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_stage_row_names_a_notebook_and_modules_that_exist():
    rows = re.findall(r"(?m)^\| (\d+) \w+ \| `(\d\d_\w+)` \| (.+?) \|", README)
    assert [int(n) for n, *_ in rows] == [int(notebook[:2]) for _, notebook, _ in rows]
    assert [int(n) for n, *_ in rows] == list(range(1, len(rows) + 1))  # no stage missing
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert [notebook for _, notebook, _ in rows] == notebooks  # one row per notebook, in order
    for _, notebook, modules in rows:
        assert (ROOT / "notebooks" / f"{notebook}.ipynb").is_file(), notebook
        for module in re.findall(r"`(\w+\.py)`", modules):
            assert (ROOT / "labkit" / module).is_file(), module


def test_the_make_targets_it_names_exist():
    makefile = (ROOT / "Makefile").read_text()
    for target in set(re.findall(r"\bmake (lab|test|notebooks|lock|bench|clean-venv)\b", README)):
        assert re.search(rf"(?m)^{target}:", makefile), target


def test_the_paths_in_the_file_map_exist():
    block = README.split("## Files", 1)[1].split("```")[1]
    folders = []  # (indent, folder): an entry indented under a folder/ line is inside it
    for indent, name in re.findall(r"(?m)^( *)([\w./-]+/?)\s{2,}", block):
        folders = [(i, f) for i, f in folders if i < len(indent)]
        path = ROOT.joinpath(*(f for _, f in folders), name)
        assert path.exists(), name
        if name.endswith("/"):
            folders.append((len(indent), name))


def test_the_python_it_asks_for_is_the_one_pyproject_accepts():
    stated = re.search(r"You need Python (\d+\.\d+) or newer", README).group(1)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["requires-python"] == f">={stated}"  # test_setup ties make to it


NUMBERS = "one two three four five six seven eight nine ten eleven twelve".split()


def stated_counts(text, noun):
    """Every "<number> <noun>" the text states, as ints: "eight notebooks" -> [8]."""
    words = re.findall(rf"(?i)\b(\d+|{'|'.join(NUMBERS)}) {noun}\b", text)
    return [int(w) if w.isdigit() else NUMBERS.index(w.lower()) + 1 for w in words]


def true_counts():
    """{noun: its number, computed from the repository}, for every noun the README counts."""
    from labkit import agent_script
    from labkit.labs.hostile import MCP_ATTACKS

    notebooks = len(list((ROOT / "notebooks").glob("*.ipynb")))
    first_commands = README.split("```bash", 1)[1].split("```")[0]  # under "The two commands"
    return {
        "notebooks": notebooks,
        "stages": notebooks,  # one notebook per stage
        "hostile servers": len(MCP_ATTACKS),
        "hostile MCP servers": len(MCP_ATTACKS),
        "commands": len(re.findall(r"(?m)^make \w+", first_commands)),
        "step script": len(agent_script.SCRIPT),  # "a six-step script"
    }


@pytest.mark.parametrize("noun", list(true_counts()))
def test_every_count_it_states_is_true(noun):
    assert set(stated_counts(README.replace("-step", " step"), noun)) <= {true_counts()[noun]}


def test_the_count_check_reads_numbers_and_every_spelled_count_is_one_it_checks():
    assert stated_counts("eight notebooks, then 2 stages", "notebooks") == [8]
    assert stated_counts("The two commands", "commands") == [2]
    text = README.replace("-step", " step")
    nouns = "|".join(sorted(map(re.escape, true_counts()), key=len, reverse=True))
    spelled = rf"(?i)\b(?:{'|'.join(NUMBERS[1:])}) (?!(?:{nouns})\b)[a-z]+"
    assert re.findall(spelled, text) == []  # a new "<two..twelve> <noun>" needs a true_counts entry


def test_jupyterlabs_terminal_opens_where_it_says():
    """JupyterLab asks for a terminal in the file browser's folder, relative ("" at the top);
    jupyter_server_terminals resolves a relative folder against the server's own working
    directory first, and `make lab` starts the server in the repository root."""
    assert "terminal opens at the repository root (the folder `make lab` ran in)" in README
    recipe = (ROOT / "Makefile").read_text().split("\nlab:", 1)[1].splitlines()[1]
    assert recipe.strip().startswith("$(BIN)/jupyter lab --notebook-dir=notebooks")  # no cd first


MAX_WORDS = 3_500  # the README keeps the commands, the stage table, going live, the file map and
# troubleshooting, and points into the notebooks for the rest: a newcomer reads it in one sitting


def test_the_readme_stays_short():
    words = len(README.split())
    assert words <= MAX_WORDS, f"README.md has {words} words — say the rest in a notebook"
