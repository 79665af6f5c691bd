"""Re-execute notebooks top to bottom in a fresh kernel, in the environment the tests use.

Usage: python .ci/execute_notebooks.py notebooks/01_setup.ipynb [more.ipynb ...]
       (or: make notebooks NB=notebooks/01_setup.ipynb; without NB, every notebook)
       --mode live|record|replay --provider NAME --keep: run them another way and keep the
       .ipynb as it is (make test-local: live against the local model; make cassettes: record
       each notebook's Go live cells into data/cassettes/). With --provider local the local
       model is started for the run (and stopped after it) unless one is already serving.

Outputs are written back into the .ipynb (the single source of a notebook); cell metadata
added by execution is dropped so diffs stay readable (nbstripout --keep-output --keep-count).
The stored kernelspec is the installed kernel's, so JupyterLab opens a notebook unmodified.
tests/test_notebooks.py checks what this script promises, with the functions below.
"""

import argparse
import contextlib
import os
import sys
import time
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


def execute(path, env=None, keep=False):
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = installed_kernelspec()
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(Path(path).parent)}},
    )
    client.execute(env=offline_environ() if env is None else env)
    if not keep:
        nbformat.write(clean(nb), path)
    print(f"executed {os.path.relpath(path, ROOT)}")


def environment(mode, provider):
    """The kernel's environment: the offline one, or the shell's (its keys) switched to `mode`."""
    if mode in ("offline", "replay") or provider == "local":  # no key is needed: none is passed
        env = offline_environ()
    else:
        env = dict(os.environ)
    env["LABKIT_MODE"] = mode
    if provider:
        env["LABKIT_PROVIDER"] = provider
    return env


def main(argv):
    parser = argparse.ArgumentParser(description="Re-execute notebooks in a fresh kernel.")
    parser.add_argument("notebooks", nargs="*")
    parser.add_argument(
        "--mode", default="offline", choices=("offline", "live", "record", "replay")
    )
    parser.add_argument("--provider", default=None, help="a LABKIT_PROVIDER preset, e.g. local")
    parser.add_argument("--keep", action="store_true", help="do not write outputs back")
    args = parser.parse_args(argv)
    targets = args.notebooks or sorted(str(p) for p in (ROOT / "notebooks").glob("*.ipynb"))
    env = environment(args.mode, args.provider)
    serving = contextlib.nullcontext()
    if args.provider == "local" and args.mode in ("live", "record"):
        from labkit.__main__ import local_server

        serving = local_server()
    failed = []
    with serving:
        for target in targets:
            started = time.monotonic()
            try:
                execute(target, env, args.keep)
            except Exception as error:  # a cell failed: name it, go on with the next notebook
                failed.append(target)
                print(f"FAILED {target}: {str(error).strip().splitlines()[-1][:300]}")
            print(f"  {time.monotonic() - started:.0f} s ({args.mode})")
    print(f"{len(targets) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
