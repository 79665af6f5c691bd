"""Run every benchmarks/bench_*.py (or those named): python -m benchmarks [rag memory ...]

Each module has main(), prints its own table, and reports ratios measured in one run.
Timings are for this machine at this moment; compare the ratios, not the absolute numbers.
"""

import importlib
import pkgutil
import sys

import benchmarks


def main(names):
    found = sorted(
        m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_")
    )
    chosen = [m for m in found if not names or m.removeprefix("bench_") in names]
    if not chosen:
        print(
            f"no benchmark matches {names}; have: "
            f"{', '.join(m.removeprefix('bench_') for m in found)}"
        )
        return 1
    for name in chosen:
        print(f"== {name} ==")
        importlib.import_module(f"benchmarks.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
