"""Notebook hygiene (what nbval and a learner need), and 01_setup run live against a local server.

nbval itself (strict, with tests/sanitize.cfg) re-executes every notebook and compares outputs;
these tests check what nbval does not: a fresh-kernel execution order, no errors, nothing
machine-specific or secret in outputs, the lesson headings in order, a reviewable file size,
valid nbformat 4.5, the installed kernel's kernelspec (JupyterLab then opens a notebook
unmodified), no blank first or last lines, Markdown that renders as its author meant, library
source printed within 100 columns (wider lines wrap), and a lesson short enough to finish (at
most four Self-check questions and six Common errors rows; only the optional Appendix after
Common errors). The live run also checks every figure a notebook draws has a title and labelled
axes (figure_problems), on the figure object itself: the PNG bytes are never compared.
"""

import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest
from markdown_it import MarkdownIt
from nbformat.warnings import MissingIDFieldWarning

import committed

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "execute_notebooks", ROOT / ".ci" / "execute_notebooks.py"
)
execute_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_notebooks)
# CommonMark with raw HTML and tables: on <details> blocks and inline tags it agrees with the
# renderer JupyterLab uses (marked), which is what a learner sees.
MARKDOWN = MarkdownIt("commonmark").enable("table")
# HTML elements a Markdown cell may use; any other <word> is an unknown tag a browser swallows.
HTML_TAGS = set(
    """a abbr b blockquote br code dd del details div dl dt em h1 h2 h3 h4 h5 h6 hr i
    img kbd li ol p pre q s samp small span strong sub summary sup table tbody td th thead tr u ul
    var""".split()
)
NOTEBOOKS = committed.tested(sorted((ROOT / "notebooks").glob("*.ipynb")))
HEADINGS = [
    "Goals",
    "Prerequisites",
    "Key ideas",
    "Build it",
    "Meet labkit",
    "Lab",
    "Go live",
    "Hands-on task",
    "Self-check",
    "Common errors",
]
# The one section allowed after Common errors: hardening a curious learner may read later.
APPENDIX = "Appendix: making it robust"
MAX_QUESTIONS, MAX_ROWS = 4, 6
# The notebooks that draw figures (matplotlib); every other notebook draws none.
FIGURES = {
    "03_memory.ipynb", "05_guardrails.ipynb", "06_rag.ipynb", "07_runtime.ipynb",
    "08_context.ipynb", "10_evals.ipynb",
}  # fmt: skip
# labkit's source lines are at most 100 characters, so a printed function never wraps.
MAX_SOURCE_COLUMNS = 100
LEAKS = [
    (
        re.compile(r"(?<![\w.])/(?:work|root|home|tmp|private|Users|var/folders)/[^\s'\"]+"),
        "absolute path",
    ),
    (re.compile(r"[A-Z]:\\\\Users\\\\"), "Windows user path"),
    (re.compile(r"\bat 0x[0-9a-fA-F]{6,}\b"), "memory address"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), "key-like string"),
    (re.compile(r"\b20\d\d-\d\d-\d\d[ T]\d\d:\d\d"), "clock time"),
]


def output_text(output):
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    return "".join(
        "".join(v) if isinstance(v, list) else str(v)
        for k, v in data.items()
        if k.startswith("text/")
    )


def _tokens(tokens):
    for token in tokens:
        yield token
        yield from _tokens(token.children or [])


def markdown_problems(source):
    """What a reader of this Markdown would see wrong once rendered: raw Markdown left inside a
    <details> answer, and words a browser drops as unknown HTML tags (write them in backticks)."""
    found = []
    for token in _tokens(MARKDOWN.parse(source)):
        if token.type in ("html_inline", "html_block"):
            for tag in re.findall(r"</?([A-Za-z][\w-]*)", token.content):
                if tag.lower() not in HTML_TAGS:
                    found.append(
                        f"<{tag}> is swallowed as an unknown HTML tag — put it in backticks"
                    )
    for answer in re.findall(r"(?s)<details>.*?</details>", MARKDOWN.render(source)):
        text = re.sub(r"(?s)<(code|pre)>.*?</\1>|<[^>]+>", "", answer)
        for raw in ("`", "**", "]("):
            if raw in text:
                found.append(
                    f"raw Markdown {raw!r} in a <details> answer — leave a blank line "
                    "after <summary>...</summary> and before </details>"
                )
                break
    return found


def sections(nb):
    """The notebook's Markdown cut at its level-2 headings: [(heading, text under it), ...]."""
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for part in re.split(r"(?m)^(?=##\s)", "".join(cell["source"])):
            heading = re.match(r"##\s+(.+?)\s*$", part, re.M)
            if heading:
                found.append((heading.group(1), part))
            elif found:  # a cell that continues a section
                found[-1] = (found[-1][0], found[-1][1] + "\n" + part)
    return found


def shape_problems(sections):
    """A lesson too long to finish, or a section after Common errors that is not the Appendix."""
    found = []
    names = [name.lower() for name, _ in sections]
    last = max((i for i, n in enumerate(names) if n.startswith("common errors")), default=None)
    for index, (name, text) in enumerate(sections):
        if name.lower().startswith("self-check"):
            asked = re.sub(r"(?s)<details>.*?</details>", "", text)  # answers may number too
            questions = len(re.findall(r"(?m)^\d+\.\s", asked))
            if questions > MAX_QUESTIONS:
                found.append(f"## Self-check has {questions} questions — at most {MAX_QUESTIONS}")
        if name.lower().startswith("common errors"):
            lines = re.findall(r"(?m)^\|.*$", text)
            rules = [line for line in lines if re.fullmatch(r"\|[\s:|-]+", line.strip())]
            rows = len(lines) - 2 * len(rules)  # each table: a header, a rule
            if rows > MAX_ROWS:
                found.append(f"## Common errors has {rows} rows — at most {MAX_ROWS}")
        if name == APPENDIX and (last is None or index < last):
            found.append(f"## {APPENDIX} comes before ## Common errors — move it to the end")
        elif last is not None and index > last and name != APPENDIX:
            found.append(f"## {name} after ## Common errors — only ## {APPENDIX} may follow it")
    return found


def problems(nb):
    found = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MissingIDFieldWarning)  # reported below
            nbformat.validate(nbformat.from_dict(nb))
    except nbformat.ValidationError as error:
        found.append(f"not valid nbformat: {str(error).splitlines()[0][:80]}")
    if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) < (4, 5):
        found.append("not nbformat 4.5 (cells need ids)")
    found += [
        f"cell {index}: no cell id" for index, cell in enumerate(nb["cells"]) if "id" not in cell
    ]
    kernelspec = nb.get("metadata", {}).get("kernelspec")
    if kernelspec != execute_notebooks.installed_kernelspec():
        found.append(
            f"kernelspec {kernelspec} is not the installed kernel's: JupyterLab marks the "
            "notebook modified on opening"
        )
    if "widgets" in nb.get("metadata", {}):
        found.append("widget state saved in metadata")
    expected = 1
    headings = [name for name, _ in sections(nb)]
    found += shape_problems(sections(nb))
    for index, cell in enumerate(nb["cells"]):
        source = "".join(cell.get("source", ""))
        lines = source.split("\n")
        if source and (not lines[0].strip() or not lines[-1].strip()):
            found.append(f"cell {index}: blank first or last line")
        if cell["cell_type"] == "markdown":
            found += [f"cell {index}: {problem}" for problem in markdown_problems(source)]
            continue
        if cell["cell_type"] != "code" or not source.strip():
            continue
        if cell.get("execution_count") != expected:
            found.append(
                f"cell {index}: execution_count {cell.get('execution_count')}, expected {expected}"
            )
        expected = (cell.get("execution_count") or expected) + 1
        prints_source = "getsource(" in source
        for output in cell.get("outputs", []):
            text = output_text(output)
            if prints_source:
                found += [
                    f"cell {index}: printed source line of {len(line)} characters — at most "
                    f"{MAX_SOURCE_COLUMNS}, or it wraps"
                    for line in text.splitlines()
                    if len(line) > MAX_SOURCE_COLUMNS
                ]
            if output.get("output_type") == "error" or (
                output.get("name") == "stderr" and "Traceback" in text
            ):
                found.append(f"cell {index}: error output")
            for pattern, what in LEAKS:
                if pattern.search(text):
                    found.append(
                        f"cell {index}: {what} in output: {pattern.search(text).group(0)[:40]}"
                    )
    position = 0
    for wanted in HEADINGS:
        later = [
            i
            for i, h in enumerate(headings)
            if h.lower().startswith(wanted.lower()) and i >= position
        ]
        if not later:
            found.append(f"heading missing or out of order: ## {wanted}")
        else:
            position = later[0]
    return found


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "01_setup.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_hygiene(path):
    text = committed.text(path)  # what git holds, not a learner's autosave
    assert len(text.encode()) < 400_000, "too large to review; trim outputs"
    assert problems(json.loads(text)) == []


def test_hygiene_check_catches_what_it_claims():
    """The check above can fail: a notebook with each problem planted is rejected for each."""
    nb = json.loads(committed.text(ROOT / "notebooks" / "01_setup.ipynb"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    code[1]["execution_count"] = 7
    code[2]["outputs"] = [
        {
            "output_type": "stream",
            "name": "stdout",
            "text": "saved to /home/ana/labkit/x at 0x7f3a2b1c9d40 with sk-abcdefghijklmnopqrstu\n",
        }
    ]
    code[3]["outputs"] = [
        {"output_type": "error", "ename": "KeyError", "evalue": "'x'", "traceback": []}
    ]
    code[4]["source"] = "\nx = 1\n"
    del nb["cells"][0]["id"]
    nb["nbformat_minor"] = 4  # ids under 4.4: 07's old state
    nb["metadata"]["kernelspec"]["display_name"] = "Python 3"
    nb["cells"] = [c for c in nb["cells"] if "## Self-check" not in "".join(c["source"])]
    found = " | ".join(problems(nb))
    for what in [
        "execution_count 7",
        "absolute path",
        "memory address",
        "key-like",
        "error output",
        "## Self-check",
        "not valid nbformat",
        "not nbformat 4.5",
        "cell 0: no cell id",
        "not the installed kernel's",
        "blank first or last line",
    ]:
        assert what in found, what


@pytest.mark.parametrize(
    "width, expected",
    [(100, []), (101, ["printed source line of 101 characters — at most 100, or it wraps"])],
    ids=["100 columns fit", "101 wrap"],
)
def test_printed_source_check_flags_a_line_that_would_wrap(width, expected):
    """01_setup's `Reply` printout given one line `width` characters wide."""
    nb = json.loads(committed.text(ROOT / "notebooks" / "01_setup.ipynb"))
    printout = next(c for c in nb["cells"] if "getsource(" in "".join(c["source"]))
    line = "    return " + "x" * (width - len("    return "))
    printout["outputs"] = [nbformat.v4.new_output("stream", name="stdout", text=line + "\n")]
    found = [p.split(": ", 1)[1] for p in problems(nb) if "printed source line" in p]
    assert found == expected


def planted(section, markdown):
    """01_setup with one Markdown cell added right after the cell that opens `## {section}`."""
    nb = json.loads(committed.text(ROOT / "notebooks" / "01_setup.ipynb"))
    at = next(
        i
        for i, cell in enumerate(nb["cells"])
        if "".join(cell["source"]).startswith(f"## {section}")
    )
    nb["cells"].insert(at + 1, nbformat.v4.new_markdown_cell(markdown))
    return nb


ROWS = "| message | cause | fix |\n|---|---|---|\n" + "| `boom` | a cause | a fix |\n" * 7


@pytest.mark.parametrize(
    "section, markdown, problem",
    [
        ("Self-check", "5. One question more?\n6. And another?", "## Self-check has"),
        ("Common errors", ROWS.strip(), "## Common errors has"),
        (
            "Common errors",
            "## Further reading\n\nMore.",
            "## Further reading after ## Common errors",
        ),
        ("Self-check", f"## {APPENDIX}\n\nHardening.", f"## {APPENDIX} comes before"),
    ],
    ids=["five questions", "seven rows", "a section after Common errors", "the Appendix early"],
)
def test_shape_check_catches_a_lesson_too_long_or_out_of_order(section, markdown, problem):
    found = problems(planted(section, markdown))
    assert any(p.startswith(problem) for p in found), found


def test_shape_check_accepts_the_appendix_after_common_errors():
    nb = planted("Common errors", f"## {APPENDIX}\n\nSeveral processes on one file.")
    assert problems(nb) == []


@pytest.mark.parametrize(
    "markdown, problem",
    [
        (
            "1. Q?\n   <details><summary>Answer</summary>Use `run()`, **not** `loop()`.</details>",
            "raw Markdown '`' in a <details> answer",
        ),
        (
            "1. Q?\n   <details><summary>Answer</summary>It is **bold**.</details>",
            "raw Markdown '**'",
        ),
        ("A document can contain </untrusted> and more.", "<untrusted> is swallowed"),
        ("Wrap it in <evidence> tags.", "<evidence> is swallowed"),
        (
            "<details><summary>Answer</summary>\nA document can contain </untrusted>.\n</details>",
            "<untrusted> is swallowed",
        ),
    ],
)
def test_markdown_check_catches_what_a_browser_would_show_wrong(markdown, problem):
    found = markdown_problems(markdown)
    assert any(p.startswith(problem) for p in found), found


@pytest.mark.parametrize(
    "markdown",
    [
        "1. Q?\n\n   <details><summary>Answer</summary>\n\n   Use `run()`, **not** `loop()`.\n\n"
        "   </details>",
        "A document can contain `</untrusted>`; <b>bold</b> and <br> are HTML.",
    ],
)
def test_markdown_check_accepts_markdown_that_renders(markdown):
    assert markdown_problems(markdown) == []


def test_saved_outputs_keep_printed_text_whole_and_no_widget_id():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "...",
                outputs=[
                    nbformat.v4.new_output("stream", name="stdout", text="first line\n"),
                    nbformat.v4.new_output("stream", name="stdout", text="second line\n"),
                    nbformat.v4.new_output(
                        "execute_result",
                        execution_count=1,
                        data={
                            "text/plain": "stepper: 1 event",
                            execute_notebooks.WIDGET_VIEW: {"model_id": "4f1c"},
                        },
                    ),
                ],
            )
        ]
    )
    printed, shown = execute_notebooks.clean(nb).cells[0].outputs
    assert printed.text == "first line\nsecond line\n"  # however the kernel flushed it
    assert shown.data == {"text/plain": "stepper: 1 event"}


def test_a_stepper_saved_and_reopened_still_shows_every_step(tmp_path):
    """Executed the way committed notebooks are, saved, reopened and exported to static HTML: the
    steps are in the file itself (no widget reference whose state a reopened notebook lacks)."""
    from nbconvert import HTMLExporter

    path = tmp_path / "stepper.ipynb"
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "from labkit import Reply, Trace\ntrace = Trace()\n"
                "trace.model(1, Reply('Paris is sunny'))\n"
                "trace.stop(1, 'completed')\ntrace.stepper()"
            )
        ]
    )
    nbformat.write(nb, path)
    execute_notebooks.execute(path)
    reopened = nbformat.read(path, as_version=4)
    (output,) = reopened.cells[0].outputs
    assert set(output.data) == {"text/plain", "text/html"}  # nothing that needs a kernel
    assert output.data["text/plain"].startswith("stepper: 2 events")
    assert output.data["text/html"].count("<details>") == 2
    page, _ = HTMLExporter().from_notebook_node(reopened)
    assert "event 1 of 2" in page and "Paris is sunny" in page
    assert "widget-view" not in page and "Error displaying widget" not in page


def test_04s_stepper_is_saved_as_html_not_as_a_widget():
    nb = json.loads(committed.text(ROOT / "notebooks" / "04_loop.ipynb"))
    shown = [
        output["data"]
        for cell in nb["cells"]
        if "stepper()" in "".join(cell["source"]) and cell["cell_type"] == "code"
        for output in cell["outputs"]
    ]
    assert shown and all(set(data) == {"text/plain", "text/html"} for data in shown)
    assert all("<details>" in "".join(data["text/html"]) for data in shown)


def test_pytest_runs_a_notebook_from_inside_the_notebooks_folder():
    """A learner who cd's into notebooks/: `../.venv/bin/python -m pytest 04_loop.ipynb`."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "04_loop.ipynb"],
        cwd=ROOT / "notebooks",
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]


def figure_problems(fig):
    """What a reader cannot tell from a figure: an Axes with no title (its own or the figure's)
    or an axis with no label. Example: figure_problems(plt.figure()) -> [] (no Axes, nothing)"""
    found = []
    title = fig._suptitle.get_text() if fig._suptitle else ""
    for n, ax in enumerate(fig.axes, 1):
        if not (title or any(ax.get_title(loc) for loc in ("left", "center", "right"))):
            found.append(f"axes {n}: no title")
        found += [
            f"axes {n}: no {x}-axis label" for x in "xy" if not getattr(ax, f"get_{x}label")()
        ]
    return found


def figure_check_cell(log):
    """A first cell that records, for every figure the notebook shows, figure_problems(figure) in
    the JSON-lines file `log`: whichever way a figure is shown, its PNG is made by print_figure."""
    return nbformat.v4.new_code_cell(
        "import json as _json\nfrom matplotlib.backend_bases import FigureCanvasBase as _Canvas\n"
        + inspect.getsource(figure_problems)
        + "_print = _Canvas.print_figure\n"
        "def _checked(self, *args, **kwargs):\n"
        f"    with open({str(log)!r}, 'a') as _log:\n"
        "        _log.write(_json.dumps(figure_problems(self.figure)) + '\\n')\n"
        "    return _print(self, *args, **kwargs)\n"
        "_Canvas.print_figure = _checked"
    )


def shown_figures(log):
    """[problems of each figure shown, in order] from a figure_check_cell log."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def run_live(
    path,
    api,
    planted="sk-planted-live-notebook-0123456789abcdef",
    other="sk-openai-key-that-must-stay-home-98765",
):
    """Execute a notebook live against the fake server; return (outputs, requests, figures)."""
    import tempfile

    import kernels
    from fake_server import FakeServer
    from offline_env import offline_environ

    nb = nbformat.reads(committed.text(path), as_version=4)
    log = Path(tempfile.mkdtemp()) / "figures.jsonl"
    nb.cells.insert(0, figure_check_cell(log))
    with FakeServer() as server:
        env = offline_environ()
        env.update(
            LABKIT_MODE="live",
            LABKIT_BASE_URL=server.url,
            LABKIT_API=api,
            LABKIT_API_KEY=planted,
            OPENAI_API_KEY=other,
        )
        kernels.execute(
            nb,
            env=env,
            timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )
        requests = list(server.requests)
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert planted not in outputs and other not in outputs, "a key reached a notebook output"
    assert all(r["headers"].get("authorization") == f"Bearer {planted}" for r in requests)
    assert other not in json.dumps(requests), "the OpenAI key was sent to a non-OpenAI server"
    assert '"output_type": "error"' not in outputs
    figures = shown_figures(log)
    log.unlink(missing_ok=True)
    log.parent.rmdir()
    return outputs, requests, figures


# make test runs the live path of the loop (04, with tools) here and of setup (01) over the Chat API
# below; every other notebook's live run is a soak trial of the same adapters, in make test-all
LIVE_IN_MAKE_TEST = {"04_loop.ipynb"}
LIVE_RUNS = [
    p if p.name in LIVE_IN_MAKE_TEST else pytest.param(p, marks=pytest.mark.soak) for p in NOTEBOOKS
]


@pytest.mark.parametrize("path", LIVE_RUNS, ids=lambda p: p.name)
def test_notebook_runs_live_against_a_local_server(path):
    """With LABKIT_MODE=live and a server speaking the Responses API, every notebook runs top to
    bottom without error, its Go live cells really talk to the server, and no key leaks; every
    figure it draws has a title and labelled axes."""
    outputs, requests, figures = run_live(path, "responses")
    assert requests, "live mode sent nothing to the server"
    assert "live:" in outputs  # describe(model) in a Go live cell
    assert os.environ.get("LABKIT_MODE") == "offline"  # the test process itself stayed offline
    assert [p for p in figures if p] == []
    assert (len(figures) > 0) == (path.name in FIGURES), "a figure drawn or missing"


def test_the_figure_check_catches_a_planted_figure(tmp_path):
    """Run the check's cell, then one good figure and three planted ones shown three ways."""
    import kernels
    from offline_env import offline_environ

    log = tmp_path / "figures.jsonl"
    plot = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\n"
    cells = [
        figure_check_cell(log),
        plot + "ax.set(title='t', xlabel='x', ylabel='y')\nplt.show()",
        plot + "ax.set(xlabel='x', ylabel='y')\nplt.show()",
        plot + "ax.set_title('t')\ndisplay(fig)\nplt.close(fig)",
        plot + "fig.suptitle('t')\nax.set_xlabel('x')",  # shown when the cell ends
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells[1:]])
    nb.cells.insert(0, cells[0])
    kernels.execute(nb, env=offline_environ(), timeout=120, kernel_name="python3")
    assert shown_figures(log) == [
        [],
        ["axes 1: no title"],
        ["axes 1: no x-axis label", "axes 1: no y-axis label"],
        ["axes 1: no y-axis label"],
    ]


def test_setup_notebook_runs_live_over_chat_completions():
    outputs, requests, _ = run_live(ROOT / "notebooks" / "01_setup.ipynb", "chat")
    assert any(r["path"].endswith("/chat/completions") for r in requests)


def test_05_runs_in_the_order_its_text_describes():
    """A Markdown cell ending in ':' is followed by the cell it introduces; the cell promising the
    detector's warning shows it; no cell starts or ends with a blank line."""
    cells = json.loads(committed.text(ROOT / "notebooks" / "05_guardrails.ipynb"))["cells"]
    text = ["".join(c["source"]) for c in cells]
    for i, source in enumerate(text[:-1]):
        if cells[i]["cell_type"] == "markdown" and source.rstrip().endswith(":"):
            assert cells[i + 1]["cell_type"] == "code", f"cell {i} introduces a Markdown cell"
    for i, source in enumerate(text):
        rows = source.split("\n")
        assert rows[0].strip() and rows[-1].strip(), f"cell {i} has a blank first or last line"
    promised = next(i for i, s in enumerate(text) if "with the detector's warning" in s)
    shown = output_text(cells[promised + 1]["outputs"][0])
    assert '"warning": "this looks like a prompt injection' in shown
    claimed = next(i for i, s in enumerate(text) if s.startswith("0 overshoot, checked rather"))
    assert "tokens: spent" in output_text(cells[claimed + 1]["outputs"][0])


def test_a_bare_pytest_in_notebooks_says_it_runs_only_the_notebooks():
    def collect(*paths, cwd):
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "--co", *paths],
            cwd=cwd, capture_output=True, text=True, timeout=300,
        ).stdout  # fmt: skip

    note = "note: run from notebooks/, pytest tested only the notebooks"
    assert note in collect(cwd=ROOT / "notebooks")
    assert note not in collect("04_loop.ipynb", cwd=ROOT / "notebooks")  # what was asked for


@pytest.mark.parametrize("name", ["01_setup.ipynb", "04_loop.ipynb"])
def test_run_all_in_live_mode_without_a_key_goes_on_to_the_end(name):
    """LABKIT_MODE=live and no key: every Go live cell says why in one line, nothing is sent, no
    cell fails, and the cells after Go live (the hands-on task) run."""
    import kernels
    from offline_env import offline_environ

    nb = nbformat.reads(committed.text(ROOT / "notebooks" / name), as_version=4)
    env = {**offline_environ(), "LABKIT_MODE": "live"}
    kernels.execute(nb, env=env, timeout=300, kernel_name="python3")  # raises on an error
    said = [output_text(o) for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    told = [line for text in said for line in text.splitlines() if "live mode cannot start" in line]
    assert told and all("OPENAI_API_KEY is not set — put OPENAI_API_KEY=" in t for t in told)
    assert not any("the call failed" in text for text in said)  # nothing was sent to blame
    last = max(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.outputs)
    assert last > [i for i, c in enumerate(nb.cells) if "## Hands-on task" in c.source][0]


def test_make_test_checks_what_git_holds_and_names_the_notebooks_a_learner_changed(tmp_path):
    """A clean checkout is tested strictly as it is; a half-run autosave and a new notebook are
    named in one line and the committed versions tested; a tarball (no git) tests its files."""
    import shutil

    for name in ("tests/committed.py", "tests/offline_env.py", "tests/kernels.py",
                 "tests/sanitize.cfg", "notebooks/conftest.py", "pyproject.toml"):  # fmt: skip
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    cell = nbformat.v4.new_code_cell("print('hi')", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nbformat.write(nb, tmp_path / "notebooks" / "one.ipynb")

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       cwd=tmp_path, check=True, capture_output=True)  # fmt: skip

    def pytest_run():
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n0", "notebooks"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
        said = [line for line in run.stdout.splitlines() if line.startswith("notebooks: ")]
        return run.returncode, said

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "one notebook")
    assert pytest_run() == (0, [])  # nothing differs: tested as it is, nothing said
    cell.outputs = [nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="")]
    nbformat.write(nb, tmp_path / "notebooks" / "one.ipynb")  # a half-run, autosaved
    nbformat.write(nb, tmp_path / "notebooks" / "two.ipynb")  # a learner's own
    code, said = pytest_run()
    assert code == 0 and len(said) == 1
    assert (
        "your working copies differ and were not tested: one.ipynb, two.ipynb (not in git)"
        in (said[0])
    )
    git("add", "notebooks/one.ipynb")  # staged: this version is now what git holds, and fails
    assert pytest_run()[0] != 0
    git("reset", "-q")
    shutil.rmtree(tmp_path / ".git")  # a tarball: the working files are all there is
    assert pytest_run() == (1, [])


def test_a_kernel_that_dies_while_starting_is_started_again_and_says_why(monkeypatch):
    """nbval's kernels start through tests/kernels.py: a death at start (a port taken by another
    process, as CI saw) is retried with what the kernel wrote to stderr as a warning; three in a
    row fail with it."""
    import kernels

    tries = []

    def dies(times):
        def start(startup_timeout, kernel_name, stderr, **kwargs):
            tries.append(kernel_name)
            if len(tries) <= times:
                stderr.write("zmq.error.ZMQError: Address already in use\n")
                raise RuntimeError("Kernel died before replying to kernel_info")
            return "km", "kc"

        return start

    monkeypatch.setattr(kernels, "_start", dies(1))
    with pytest.warns(UserWarning, match="(?s)kernel start 1 failed.*Address already in use"):
        assert kernels.start_new_kernel(kernel_name="python3", stderr=None) == ("km", "kc")
    assert tries == ["python3", "python3"]
    tries.clear()
    monkeypatch.setattr(kernels, "_start", dies(3))
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="(?s)3 tries.*in use"):
        kernels.start_new_kernel(kernel_name="python3")
    import nbval.kernel

    assert nbval.kernel.start_new_kernel is kernels.start_new_kernel  # installed for nbval
