"""07_runtime beside DBOS: the same refund as a DBOS workflow, its workers killed and
recovered, a bank that honours idempotency keys.

Outside the lessons (see labkit.labs).
"""

import json
import multiprocessing
import multiprocessing.connection
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from ..errors import ServiceError, UserError
from ..runtime import operation_id as runtime_operation_id
from ..trace import clip

# ---------------------------------------------------- 07_runtime: the same refund on DBOS

# Where a DBOS worker is killed, in the order a refund reaches them. DBOS records a workflow when
# it starts and a step's output when the step returns; nothing in between.
DBOS_POINTS = (
    "before_workflow",  # nothing recorded: the caller's retry starts it
    "before_step",  # workflow recorded, step not started: recovery runs the step
    "before_effect",  # in the step, before the bank is asked: recovery runs the step
    "after_effect",  # in the step, after the bank paid, output not recorded: it runs AGAIN
    "after_step",  # step output recorded: recovery returns it, the step does not run
    "after_workflow",  # workflow done: the retry gets the recorded result
)


class Bank:
    """The external system: a file with one line per refund request it received.

    Like a payment provider, it honours an idempotency key (Stripe's Idempotency-Key): a key it has
    paid before gets the first receipt again and moves no money. Without a key, every request pays.
    Example: Bank(folder / "bank.txt").refund("A-1", 30, key="op_...")["receipt"]  ->  "R-1"
    """

    def __init__(self, path):
        self.path = Path(path)

    def lines(self) -> list[list[str]]:
        """Every request: [outcome ("paid" | "replayed"), order_id, amount, key or "-"]."""
        text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        return [line.split() for line in text.splitlines()]

    def refund(self, order_id: str, amount: int, key: str | None = None) -> dict:
        paid = [line for line in self.lines() if line[0] == "paid"]
        first = next((n for n, line in enumerate(paid, 1) if key and line[3] == key), None)
        with open(self.path, "a", encoding="utf-8") as ledger:
            ledger.write(f"{'replayed' if first else 'paid'} {order_id} {amount} {key or '-'}\n")
            ledger.flush()
            os.fsync(ledger.fileno())  # the money moved, whatever happens to the caller next
        return {"receipt": f"R-{first or len(paid) + 1}", "replayed": first is not None}

    def requests(self, order_id: str) -> int:
        return sum(line[1] == order_id for line in self.lines())

    def refunds(self, order_id: str) -> int:
        return sum(line[1] == order_id and line[0] == "paid" for line in self.lines())


def _dbos_worker(folder, order, point, previous, keyed):
    """One worker process: DBOS recovers what the last worker left, the caller retries the last
    request (its answer was lost), then this worker refunds `order` and is killed at `point`."""
    from dbos import DBOS, SetWorkflowID

    bank = Bank(folder / "bank.txt")

    def crash(at, order_id):  # SIGKILL: no cleanup, no finally, no flush
        if (at, order_id) == (point, order):
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))

    db = folder / "dbos.sqlite3"
    # the listener polls every 10 ms, so a worker shuts down at once instead of within a second
    config = {"name": "labkit-refunds", "system_database_url": f"sqlite:///{db}"}
    config.update(log_level="ERROR", notification_listener_polling_interval_sec=0.01)
    DBOS(config=config)

    @DBOS.step()
    def send_refund(order_id: str, amount: int) -> dict:
        crash("before_effect", order_id)
        arguments = {"order_id": order_id, "amount": amount}
        key = runtime_operation_id("agent", "refund", arguments, order_id) if keyed else None
        receipt = bank.refund(order_id, amount, key)
        crash("after_effect", order_id)
        return receipt

    @DBOS.workflow()
    def refund_workflow(order_id: str, amount: int) -> dict:
        crash("before_step", order_id)
        receipt = send_refund(order_id, amount)
        crash("after_step", order_id)
        return receipt

    def request(order_id):  # the caller names the intent: one workflow id per refund
        with SetWorkflowID(f"refund-{order_id}"):
            return refund_workflow(order_id, 30)

    DBOS.launch()  # 1. DBOS's own recovery: every workflow left PENDING runs again
    for pending in DBOS.list_workflows(status="PENDING"):
        DBOS.retrieve_workflow(pending.workflow_id).get_result(polling_interval_sec=0.01)
    if previous:  # 2. the caller retries the last request: a done workflow is not run again
        request(previous)
    if order:  # 3. this worker's own refund, killed at `point`
        crash("before_workflow", order)
        request(order)
        crash("after_workflow", order)
    DBOS.destroy()


def _dbos_runner():
    """In a fresh process: run the chains read from stdin at once, print their rows as JSON.

    A chain is one store: its workers run one after another, each recovering the last one's work.
    The chains run side by side, so most of their waiting (DBOS polls its queue) overlaps.
    """
    chains = json.loads(sys.stdin.read())
    import dbos  # noqa: F401 -- imported once, before forking: each worker starts with it loaded

    # fork (this process has no threads): a worker starts in milliseconds; elsewhere, spawn
    context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    orders = [[f"{c['tag']}{n + 1}" for n in range(len(c["points"]))] for c in chains]
    codes = [[] for _ in chains]

    def start(c):  # the next worker of chain c; the last one only recovers and retries
        n, chain = len(codes[c]), chains[c]
        order, point = (orders[c][n], chain["points"][n]) if n < len(orders[c]) else (None, None)
        previous = orders[c][n - 1] if n else None
        worker = context.Process(
            target=_dbos_worker,
            args=(Path(chain["folder"]), order, point, previous, chain["keyed"]),
        )
        worker.start()
        return worker

    running = {c: start(c) for c in range(len(chains))}
    while running:
        multiprocessing.connection.wait([w.sentinel for w in running.values()], timeout=120)
        for c, worker in list(running.items()):
            if worker.exitcode is None:
                continue
            worker.join()  # reaped
            codes[c].append(worker.exitcode)
            del running[c]
            if len(codes[c]) <= len(orders[c]):
                running[c] = start(c)
    killed = -getattr(signal, "SIGKILL", signal.SIGTERM)
    rows = []
    for chain, names, exits in zip(chains, orders, codes, strict=True):
        bank = Bank(Path(chain["folder"]) / "bank.txt")
        rows.append(
            [
                {
                    "order": order,
                    "point": point,
                    "killed": code == killed,
                    "requests": bank.requests(order),
                    "refunds": bank.refunds(order),
                }
                for order, point, code in zip(names, chain["points"], exits, strict=False)
            ]
        )
    print(json.dumps({"rows": rows, "last_exits": [exits[-1] for exits in codes]}))


def kill_points(trials: int, seed: int = 0) -> list[str]:
    """`trials` kill points in a seeded random order: rounds of the six points, each shuffled.

    Example: kill_points(6)  ->  the six DBOS_POINTS, shuffled
    """
    rng = random.Random(seed)
    points: list[str] = []
    while len(points) < trials:
        points += rng.sample(DBOS_POINTS, len(DBOS_POINTS))
    return points[:trials]


def dbos_kill_trial(folder, points, chains: int = 6) -> dict:
    """Refund one order per point as a DBOS workflow; SIGKILL each worker at its point; restart.

    Each restart is a new worker whose DBOS.launch() recovers what the killed one left; the caller
    then retries the lost request with the same workflow id. "with key" passes labkit's operation_id
    to the bank as the idempotency key, "without key" none. The points are split over `chains`
    stores per mode, run side by side (DBOS recovers through a queue it polls once a second).
    Example: dbos_kill_trial(tmp, kill_points(20))["without key"][0]  ->  {"order", "point",
             "killed", "requests", "refunds"}
    """
    folder, points = Path(folder), list(points)
    if unknown := sorted(set(points) - set(DBOS_POINTS)):
        raise UserError(f"unknown kill points {unknown} — use some of {', '.join(DBOS_POINTS)}")
    chains = max(1, min(chains, len(points)))
    modes = (("with key", True), ("without key", False))
    spec = []
    for mode, keyed in modes:
        for c in range(chains):
            store = folder / mode / f"store{c + 1}"
            store.mkdir(parents=True, exist_ok=True)
            tag = "ABCDEFGHJKLMNPQRSTUVWXYZ"[c % 24]
            spec.append(
                {"folder": str(store), "points": points[c::chains], "keyed": keyed, "tag": tag}
            )
    runner = subprocess.Popen(
        [sys.executable, "-c", "from labkit.labs.dbos_refund import _dbos_runner; _dbos_runner()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = runner.communicate(json.dumps(spec), timeout=600)
    finally:
        if runner.poll() is None:  # it hung: never leave it running
            runner.kill()
            runner.communicate()
    if runner.returncode != 0 or not out.strip():
        raise ServiceError(f"the DBOS trial failed: {clip(err.strip()[-300:], 300)}")
    result = json.loads(out.splitlines()[-1])
    if any(code != 0 for code in result["last_exits"]):
        raise ServiceError(f"a recovering DBOS worker failed: exit codes {result['last_exits']}")
    # back in the order of `points`: trial n ran (n // chains)-th in store n % chains
    by_mode = {
        mode: result["rows"][m * chains : (m + 1) * chains] for m, (mode, _) in enumerate(modes)
    }
    return {
        mode: [stores[n % chains][n // chains] for n in range(len(points))]
        for mode, stores in by_mode.items()
    }
