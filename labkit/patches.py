"""Patches: apply a unified diff or a search/replace edit to a workspace, and keep every edit.

Built in 11_coding_agent. `apply_diff(ws, diff)` applies a unified diff (as `git diff` writes it)
only when every hunk matches exactly: a stale or malformed patch changes nothing and raises a
ToolError that tells the model what to do. `replace(ws, path, search, replace)` is the simpler
edit: the search text must occur exactly once. `Edits` keeps every file's text before each edit,
so an edit can be shown and undone. Left out: fuzzy hunk matching (`patch --fuzz`, git's
whitespace options), renames, binary files and file modes.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ToolError, UserError
from .sandbox import Workspace

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Edit:
    path: str
    before: str | None  # None: the file did not exist
    after: str | None  # None: the file was deleted


@dataclass
class Edits:
    """Every edit made in a workspace, in order. Example: edits.undo(ws) undoes the last one."""

    done: list = field(default_factory=list)  # one list of Edit per apply

    def undo(self, ws: Workspace) -> list[str]:
        """Undo the last apply; return the paths it restored."""
        if not self.done:
            raise UserError("there is no edit to undo")
        last = self.done.pop()
        for edit in reversed(last):
            _write(ws, edit.path, edit.before)
        return [e.path for e in last]


def inside(ws: Workspace, path: str) -> Path:
    """ws.inside(path) for a path the model gave: outside the workspace is a result it can act on.

    Example: inside(ws, "../x") raises ToolError(kind="outside_workspace")
    """
    try:
        return ws.inside(path)
    except UserError as exc:
        raise ToolError(str(exc), "outside_workspace") from None


def _write(ws, path, text):
    where = inside(ws, path)
    if text is None:
        where.unlink(missing_ok=True)
        return
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(text)


def _path(header: str) -> str | None:
    name = header[4:].split("\t")[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def parse_diff(diff: str) -> list:
    """[(old path, new path, [hunk, ...])] where a hunk is (old start, [lines]). ToolError if bad.

    Example: parse_diff("--- a/x.py\\n+++ b/x.py\\n@@ -1 +1 @@\\n-a\\n+b\\n")
    """
    lines, files, i = diff.splitlines(keepends=True), [], 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise ToolError("a '--- a/path' line must be followed by '+++ b/path'", "bad_patch")
        old, new, hunks = _path(lines[i]), _path(lines[i + 1]), []
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            m = HUNK.match(lines[i])
            if not m:
                raise ToolError(f"bad hunk header {lines[i].strip()!r}", "bad_patch")
            body, i = [], i + 1
            while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\"):
                if not lines[i].startswith("\\"):  # "\ No newline at end of file"
                    body.append(lines[i])
                i += 1
            hunks.append((int(m.group(1)), body))
        files.append((old, new, hunks))
    if not files:
        raise ToolError(
            "no file in this patch — send a unified diff with '--- a/path', '+++ b/path' and "
            "'@@ -l,n +l,n @@' hunks, or use a search/replace edit",
            "bad_patch",
        )
    return files


def _patched(text: str, hunks, path: str) -> str:
    """The text with each hunk applied at its line; ToolError naming the first that does not fit."""
    old = text.splitlines(keepends=True)
    out, at = [], 0
    for number, (start, body) in enumerate(hunks, 1):
        want = [line[1:] for line in body if line[0] in " -"]
        begin = max(start - 1, 0) if want else start
        if old[begin : begin + len(want)] != want:
            shown = "".join(want[:3]).rstrip()
            raise ToolError(
                f"hunk {number} of {path} does not apply: the file does not have these lines at "
                f"line {start} ({shown!r}...) — read_file the lines again and send a patch made "
                "from the current text",
                "patch_does_not_apply",
            )
        out += old[at:begin] + [line[1:] for line in body if line[0] in " +"]
        at = begin + len(want)
    return "".join(out + old[at:])


def apply_diff(ws: Workspace, diff: str, edits: Edits | None = None) -> list[str]:
    """Apply a unified diff to the workspace, all or nothing; return the paths it changed.

    Example: apply_diff(ws, task["patch"])  ->  ["pantry/units.py"]
    """
    changes = []
    for old, new, hunks in parse_diff(diff):
        path = new or old
        where = inside(ws, path)  # a path outside: ToolError, nothing written
        before = where.read_text() if old and where.exists() else None
        if old and before is None:
            raise ToolError(f"{path} does not exist — check the path with list_files", "no_file")
        if not old and where.exists():
            raise ToolError(f"{path} exists already — patch it, do not create it", "file_exists")
        after = None if new is None else _patched(before or "", hunks, path)
        changes.append(Edit(path, before, after))
    for change in changes:  # every hunk fits: now write
        _write(ws, change.path, change.after)
    if edits is not None:
        edits.done.append(changes)
    return [c.path for c in changes]


def replace(
    ws: Workspace, path: str, search: str, replacement: str, edits: Edits | None = None
) -> str:
    """Replace the one occurrence of `search` in a file; ToolError when it occurs 0 or 2+ times.

    Example: replace(ws, "pantry/units.py", "amount * 100\\n", "amount * 1000\\n")
    """
    where = inside(ws, path)
    if not where.is_file():
        raise ToolError(f"{path} does not exist — check the path with list_files", "no_file")
    text = where.read_text()
    found = text.count(search) if search else 0
    if found != 1:
        how = "does not occur" if found == 0 else f"occurs {found} times"
        raise ToolError(
            f"the search text {how} in {path} — copy it exactly from read_file, with enough "
            "lines around it to occur once",
            "patch_does_not_apply",
        )
    after = text.replace(search, replacement)
    where.write_text(after)
    if edits is not None:
        edits.done.append([Edit(path, text, after)])
    return path
