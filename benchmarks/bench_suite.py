"""How long `make test` takes, where the time goes, and what the notebooks cost over the floor.

python -m benchmarks suite   (LABKIT_BENCH_JOBS=0 runs the suite in one process;
                              LABKIT_BENCH_SUITE=notebooks measures only part 2)

1. The suite the way `make test` runs it (pytest -n auto --dist loadfile -m "not soak"): wall
   time, and the 25 slowest tests and notebook cells with their share of the summed test time.
2. The notebook series under strict nbval, one process, one notebook after another, beside the
   floor: as many bare kernels (a one-cell notebook that imports torch and labkit) under the same
   nbval. series / floor is what the lessons themselves cost over starting their kernels.
Timings are this machine's at this moment; the ratio is measured in one run.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "benchmarks.suite_timer"  # records every test's duration where the run is reported


def run_pytest(args, out: Path, cwd: Path = ROOT) -> float:
    """Wall seconds of one pytest run; its per-test durations go to `out` (JSON)."""
    env = {**os.environ, "LABKIT_SUITE_TIMES": str(out), "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", PLUGIN, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(f"  pytest {' '.join(args)}: {last}")
    return wall


def slowest(times: dict, n: int = 25) -> None:
    total = sum(times.values()) or 1.0
    print(f"  {'seconds':>8} {'share':>6}  test or cell")
    for name, seconds in sorted(times.items(), key=lambda p: -p[1])[:n]:
        print(f"  {seconds:>8.1f} {seconds / total:>6.1%}  {name}")


def bare_notebooks(folder: Path, count: int) -> list[str]:
    paths = []
    for i in range(count):
        book = nbformat.v4.new_notebook()
        book.cells = [nbformat.v4.new_code_cell("import torch\nimport labkit", id=f"floor{i}")]
        book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        path = folder / f"bare_{i:02d}.ipynb"
        nbformat.write(book, path)
        paths.append(str(path))
    return paths


def main(argv=None):
    jobs = os.environ.get("LABKIT_BENCH_JOBS", "auto")
    books = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if os.environ.get("LABKIT_BENCH_SUITE") != "notebooks":
            print(f"1. the suite as `make test` runs it (-n {jobs})")
            parallel = [] if jobs == "0" else ["-n", jobs, "--dist", "loadfile"]
            wall = run_pytest([*parallel, "-m", "not soak"], tmp / "suite.json")
            times = json.loads((tmp / "suite.json").read_text())
            print(f"  wall {wall:.0f} s; summed test time {sum(times.values()):.0f} s")
            slowest(times)
        print(f"2. the {len(books)} notebooks under strict nbval, one after another, and the floor")
        series = run_pytest(["-n0", *books], tmp / "series.json")
        # the bare kernels run from their own folder: the repository's pytest set-up collects
        # only the notebooks git holds; the same strict nbval options, on the same kernel
        bare = [Path(p).name for p in bare_notebooks(tmp, len(books))]
        nbval = ["-n0", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider"]
        floor = run_pytest(["-c", os.devnull, "--rootdir", str(tmp), *nbval, *bare],
                           tmp / "floor.json", cwd=tmp)  # fmt: skip
        cells = json.loads((tmp / "series.json").read_text())
        per_book = {}
        for name, seconds in cells.items():
            book = name.split("::")[0]
            per_book[book] = per_book.get(book, 0.0) + seconds
        for book, seconds in sorted(per_book.items()):
            print(f"  {seconds:>6.1f} s  {book}")
        print("  the slowest cells:")
        slowest(cells, 15)
        print(
            f"  series {series:.1f} s, floor of {len(books)} bare kernels {floor:.1f} s: "
            f"series / floor = {series / floor:.2f}x"
        )


if __name__ == "__main__":
    main()
