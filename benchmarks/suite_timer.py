"""A pytest plugin for bench_suite: each test's setup + call + teardown seconds, written as JSON to
$LABKIT_SUITE_TIMES when the session ends (by the controller only, under pytest-xdist)."""

import json
import os

TIMES: dict[str, float] = {}


def pytest_runtest_logreport(report):
    TIMES[report.nodeid] = TIMES.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session):
    out = os.environ.get("LABKIT_SUITE_TIMES")
    if out and not hasattr(session.config, "workerinput"):
        with open(out, "w", encoding="utf-8") as f:
            json.dump(TIMES, f)
