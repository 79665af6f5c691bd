"""Command lines: `python -m labkit memory set|list|delete|export`.

Outside the lessons. The memory command line lets a person see, change, delete and export what the
agent remembers (03_memory); `python -m labkit.memory ...` runs the same one. Every problem is one
line on stderr and exit code 2, never a traceback.
"""

import argparse
import json
import sqlite3
import sys
import time

from .config import RUNTIME_DIR
from .errors import LabkitError, UserError
from .memory import DAY, KINDS, MemoryStore
from .schema import check_text

CLI_PATH = RUNTIME_DIR / "memory.sqlite3"  # not the current folder: one store wherever you run it


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage mistake reported in one line too (what is wrong — where help is)."""

    def error(self, message):
        self.exit(2, f"error: {message} — see {self.prog} --help\n")


def memory_parser(prog="python -m labkit memory"):
    """The parser of the memory command line. Example: memory_parser().parse_args(["list"]).db"""
    common = _Parser(add_help=False)
    common.add_argument(
        "--db",
        default=str(CLI_PATH),
        help="the SQLite file (default: .runtime/memory.sqlite3 "
        "in the repository root, whatever folder you run from: %(default)s)",
    )
    common.add_argument("--tenant", default="me", help="whose memories (default: %(default)s)")
    parser = _Parser(
        prog=prog,
        description="See, change, delete and export what the agent remembers. The "
        "store is .runtime/memory.sqlite3 in the repository root, whatever folder you "
        "run from; --db picks another file.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    put = commands.add_parser(
        "set", parents=[common], help="store or replace a memory; running it is your confirmation"
    )
    put.add_argument("content")
    put.add_argument("--id", help="the slot, e.g. units; the same id replaces the old value")
    put.add_argument("--kind", default="preference", help=f"one of {', '.join(KINDS)}")
    put.add_argument("--importance", type=float, default=0.5)
    put.add_argument("--ttl-days", type=float, default=90)
    commands.add_parser("list", parents=[common], help="every live memory")
    delete = commands.add_parser(
        "delete", parents=[common], help="delete one memory and its history"
    )
    delete.add_argument("id")
    commands.add_parser("export", parents=[common], help="everything stored about you, as JSON")
    return parser


def _default_folder():
    """Create .runtime/ for the default store (only the default: a --db folder must exist)."""
    try:
        CLI_PATH.parent.mkdir(exist_ok=True)
        return
    except OSError as exc:
        why = exc.strerror
    raise UserError(
        f"cannot create the folder {str(CLI_PATH.parent)!r} for the default store "
        f"({why}) — pass --db with a file in a folder you can write"
    )


def memory_main(argv=None, clock=time.time, prog="python -m labkit memory"):
    """The memory command line: one line on stderr and exit code 2 for any problem, no traceback.

    Example: python -m labkit memory set "Prefers metric units" --id units
    """
    args = memory_parser(prog).parse_args(argv)
    try:
        # bad bytes arrive as lone surrogates: refused first (a --db path may hold any bytes)
        for name, value in vars(args).items():
            if name != "db" and isinstance(value, str):
                check_text(value, name, UserError)
        if args.db == str(CLI_PATH):
            _default_folder()
        with MemoryStore(args.db, clock=clock) as store:
            if args.command == "set":
                ttl = int(args.ttl_days) if float(args.ttl_days).is_integer() else args.ttl_days
                result = store.write(
                    args.tenant,
                    args.content,
                    id=args.id,
                    kind=args.kind,
                    confirmed=True,
                    importance=args.importance,
                    ttl_days=ttl,
                )
                print(f"{result.status} {result.memory.id}: {result.message}")
            elif args.command == "list":
                now = clock()
                for m in store.list(args.tenant):
                    print(
                        f"{m.id}  {m.kind}  {m.content!r}  importance {m.importance:g}, "
                        f"expires in {round((m.expires_at - now) / DAY)} days"
                    )
                print(f"{store.count(args.tenant)} memories for tenant {args.tenant!r}")
            elif args.command == "delete":
                print(f"deleted {store.delete(args.tenant, args.id).id}")
            else:
                print(json.dumps(store.export(args.tenant), indent=2, ensure_ascii=False))
    except LabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (sqlite3.Error, OSError) as exc:  # e.g. a file another program broke while we read it
        print(
            f"error: the memory store {args.db!r} failed ({type(exc).__name__}: {exc}) — check "
            "the file, or pass --db with a new file name",
            file=sys.stderr,
        )
        return 2
    return 0


COMMANDS = {"memory": memory_main}


def main(argv=None):
    """`python -m labkit <command> ...`: runs the command's own command line.

    Example: main(["memory", "list"])  ->  0
    """
    parser = _Parser(prog="python -m labkit", description="labkit's command lines.")
    parser.add_argument("command", choices=COMMANDS, help="memory: what the agent remembers")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the command's arguments")
    args = parser.parse_args(argv)
    return COMMANDS[args.command](args.arguments, prog=f"python -m labkit {args.command}")


if __name__ == "__main__":
    sys.exit(main())
