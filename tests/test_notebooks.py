"""Notebook hygiene (what nbval and a learner need), and 01_setup run live against a local server.

nbval itself (strict, with tests/sanitize.cfg) re-executes every notebook and compares outputs;
these tests check what nbval does not: a fresh-kernel execution order, no errors, nothing
machine-specific or secret in outputs, the lesson headings in order, a reviewable file size.
"""
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
HEADINGS = ["Goals", "Prerequisites", "Key ideas", "Build it", "Meet labkit", "Lab", "Go live",
            "Hands-on task", "Self-check", "Common errors"]
LEAKS = [
    (re.compile(r"(?<![\w.])/(?:work|root|home|tmp|private|Users|var/folders)/[^\s'\"]+"), "absolute path"),
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
    return "".join("".join(v) if isinstance(v, list) else str(v) for k, v in data.items() if k.startswith("text/"))


def problems(nb):
    found = []
    if nb.get("nbformat") != 4 or nb.get("metadata", {}).get("kernelspec", {}).get("name") != "python3":
        found.append("not nbformat 4 with kernelspec python3")
    if "widgets" in nb.get("metadata", {}):
        found.append("widget state saved in metadata")
    expected, headings = 1, []
    for index, cell in enumerate(nb["cells"]):
        source = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            headings += re.findall(r"(?m)^##\s+(.+?)\s*$", source)
            continue
        if cell["cell_type"] != "code" or not source.strip():
            continue
        if cell.get("execution_count") != expected:
            found.append(f"cell {index}: execution_count {cell.get('execution_count')}, expected {expected}")
        expected = (cell.get("execution_count") or expected) + 1
        for output in cell.get("outputs", []):
            text = output_text(output)
            if output.get("output_type") == "error" or (output.get("name") == "stderr" and "Traceback" in text):
                found.append(f"cell {index}: error output")
            for pattern, what in LEAKS:
                if pattern.search(text):
                    found.append(f"cell {index}: {what} in output: {pattern.search(text).group(0)[:40]}")
    position = 0
    for wanted in HEADINGS:
        later = [i for i, h in enumerate(headings) if h.lower().startswith(wanted.lower()) and i >= position]
        if not later:
            found.append(f"heading missing or out of order: ## {wanted}")
        else:
            position = later[0]
    return found


def test_there_are_notebooks():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "01_setup.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_hygiene(path):
    assert path.stat().st_size < 400_000, "too large to review; trim outputs"
    assert problems(json.loads(path.read_text())) == []


def test_hygiene_check_catches_what_it_claims():
    """The check above can fail: a notebook with each problem planted is rejected for each."""
    nb = json.loads((ROOT / "notebooks" / "01_setup.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    code[1]["execution_count"] = 7
    code[2]["outputs"] = [{"output_type": "stream", "name": "stdout",
                           "text": "saved to /home/ana/labkit/x at 0x7f3a2b1c9d40 with sk-abcdefghijklmnopqrstu\n"}]
    code[3]["outputs"] = [{"output_type": "error", "ename": "KeyError", "evalue": "'x'", "traceback": []}]
    nb["cells"] = [c for c in nb["cells"] if "## Self-check" not in "".join(c["source"])]
    found = " | ".join(problems(nb))
    for what in ["execution_count 7", "absolute path", "memory address", "key-like", "error output",
                 "## Self-check"]:
        assert what in found, what


def run_live(path, api, planted="sk-planted-live-notebook-0123456789abcdef",
             other="sk-openai-key-that-must-stay-home-98765"):
    """Execute a notebook with LABKIT_MODE=live against the fake server; return (outputs, requests)."""
    import nbformat
    from nbclient import NotebookClient

    from fake_server import FakeServer
    from offline_env import offline_environ

    nb = nbformat.read(path, as_version=4)
    with FakeServer() as server:
        env = offline_environ()
        env.update(LABKIT_MODE="live", LABKIT_BASE_URL=server.url, LABKIT_API=api,
                   LABKIT_API_KEY=planted, OPENAI_API_KEY=other)
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute(env=env)
        requests = list(server.requests)
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert planted not in outputs and other not in outputs, "a key reached a notebook output"
    assert all(r["headers"].get("authorization") == f"Bearer {planted}" for r in requests)
    assert other not in json.dumps(requests), "the OpenAI key was sent to a non-OpenAI server"
    assert '"output_type": "error"' not in outputs
    return outputs, requests


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_live_against_a_local_server(path):
    """With LABKIT_MODE=live and a server speaking the Responses API, every notebook runs top to
    bottom without error, its Go live cells really talk to the server, and no key leaks."""
    outputs, requests = run_live(path, "responses")
    assert requests, "live mode sent nothing to the server"
    assert "live:" in outputs                           # describe(model) in a Go live cell
    assert os.environ.get("LABKIT_MODE") == "offline"   # the test process itself stayed offline


def test_setup_notebook_runs_live_over_chat_completions():
    outputs, requests = run_live(ROOT / "notebooks" / "01_setup.ipynb", "chat")
    assert any(r["path"].endswith("/chat/completions") for r in requests)


def test_05_runs_in_the_order_its_text_describes():
    """A Markdown cell ending in ':' is followed by the cell it introduces; the cell promising the
    detector's warning shows it; no cell starts or ends with a blank line."""
    cells = json.loads((ROOT / "notebooks" / "05_guardrails.ipynb").read_text())["cells"]
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
