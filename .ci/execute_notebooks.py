"""Re-execute notebooks top to bottom in a fresh kernel, in the environment the tests use.

Usage: python .ci/execute_notebooks.py notebooks/01_setup.ipynb [more.ipynb ...]
       (or: make notebooks NB=notebooks/01_setup.ipynb; without NB, every notebook)

Outputs are written back into the .ipynb (the single source of a notebook); cell metadata
added by execution is dropped so diffs stay readable (nbstripout --keep-output --keep-count).
The stored kernelspec is the installed kernel's, so JupyterLab opens a notebook unmodified.
tests/test_notebooks.py checks what this script promises, with the functions below.
"""

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from offline_env import offline_environ  # noqa: E402

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def installed_kernelspec(name="python3"):
    """The kernelspec metadata JupyterLab writes for the installed kernel `name`."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(name)
    return {"display_name": spec.display_name, "language": spec.language, "name": name}


def clean(nb):
    """Drop what execution adds that no reader needs: widget state, timing, a widget's random id,
    and the splits of printed text at the moments the kernel happened to flush."""
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for key in ("execution", "collapsed", "scrolled", "ExecuteTime"):
            cell.metadata.pop(key, None)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data and "text/plain" in data:
                # no saved state backs the view, so a static copy would show nothing: keep the text
                del data[WIDGET_VIEW]
    return nb


def execute(path):
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = installed_kernelspec()
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(Path(path).parent)}},
    )
    client.execute(env=offline_environ())
    nbformat.write(clean(nb), path)
    print(f"executed {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    targets = sys.argv[1:] or sorted(str(p) for p in (ROOT / "notebooks").glob("*.ipynb"))
    for target in targets:
        execute(target)
