"""A worker process for the crash and concurrency labs in tests/test_runtime.py.

    python tests/runtime_worker.py crash DB LEDGER ENTRY KILL_AT EFFECT_FIRST
        dispatch one ledger append and SIGKILL itself at KILL_AT (one of
        labkit.runtime.CRASH_POINTS,
        or "none"); for "during_execute", EFFECT_FIRST=1 kills just after the ledger line is
        written,
        0 just before. Kill points are named, not timed, so every trial is reproducible.
    python tests/runtime_worker.py race DB LEDGER ENTRY
        print "ready", wait for one line on stdin, then dispatch the same append (a slow one).

A worker that survives prints its dispatch result as one JSON line.
"""

import json
import os
import signal
import sys
import time

from labkit.runtime import ToolRuntime, operation_id
from labkit.tools import Tool

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["entry", "amount"],
    "properties": {"entry": {"type": "string"}, "amount": {"type": "integer"}},
}


def ledger_tool(path, kill=lambda point: None, delay=0.0):
    """A tool with a real side effect: it appends a line to a ledger file (fsynced)."""

    def append_ledger(entry, amount):
        kill("during_execute:before")
        time.sleep(delay)
        with open(path, "a", encoding="utf-8") as ledger:
            ledger.write(f"{entry} {amount}\n")
            ledger.flush()
            os.fsync(ledger.fileno())
        kill("during_execute:after")
        with open(path, encoding="utf-8") as ledger:
            return {
                "entry": entry,
                "receipt": f"R-{sum(1 for _ in ledger)}",
            }  # differs on every run

    return Tool(
        "append_ledger",
        "Append an entry to the ledger: an irreversible side effect.",
        SCHEMA,
        append_ledger,
        risk="high",
    )


def ledger_lines(path, entry):
    """How many times `entry` was written to the ledger (the side effect, counted)."""
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as ledger:
        return sum(1 for line in ledger if line.split()[0] == entry)


def request(entry):
    """The arguments and operation_id every run of a trial uses for `entry`."""
    arguments = {"entry": entry, "amount": 10}
    return arguments, operation_id("lab", "append_ledger", arguments, scope=entry)


def main(argv):
    mode, db, ledger, entry = argv[:4]
    target = argv[4] if mode == "crash" else None
    if target == "during_execute":
        target += ":after" if argv[5] == "1" else ":before"

    def kill(point):
        if point == target:
            os.kill(os.getpid(), signal.SIGKILL)

    runtime = ToolRuntime(
        [ledger_tool(ledger, kill, 0.3 if mode == "race" else 0.0)],
        max_risk="high",
        store=db,
        failpoint=kill,
    )
    arguments, op = request(entry)
    if mode == "race":
        print("ready", flush=True)
        sys.stdin.readline()
    print(json.dumps(runtime.dispatch("append_ledger", arguments, op)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
