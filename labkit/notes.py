"""Notes for long tasks: one Markdown file per note, YAML front matter on top, and an index.

Built in 03_memory. A task that outlives one context window writes its state down: where it stands
(task_state), what was decided (conclusion), what is in the way (blocker), what comes next
(action), where things are (reference). `NoteBook(folder)` creates, reads, updates, searches and
lists notes; INDEX.md is the one short file read first. A file is "<id>-<slug of the title>.md", so
no title can leave the folder; ids come from a counter in .next_id and are never reused.
Deliberately left out: locking between processes (one writer per folder), links between notes,
attachments, history of edits (use git), ranking beyond keyword overlap.
"""

# NoteBook.list would shadow the built-in list in the annotations of the methods after it
from __future__ import annotations

import builtins  # the list type, in NoteBook where `list` names a method
import os
import re
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .errors import UserError
from .memory_rules import idf, iso, tokens
from .schema import check_text, required_id
from .trace import clip

TYPES = ("task_state", "conclusion", "blocker", "action", "reference")
MAX_TITLE = 500
INDEX = "INDEX.md"
COUNTER = ".next_id"  # the next note id, e.g. "n4": deleting a note never frees its id
_NAME = re.compile(r"(n\d+)-[a-z0-9-]+\.md")


@dataclass
class Note:
    id: str  # "n1", "n2", ... from a counter
    title: str
    type: str  # task_state | conclusion | blocker | action | reference
    tags: list = field(default_factory=list)
    created_at: str = ""  # UTC ISO text, from the notebook's clock
    updated_at: str = ""
    body: str = ""
    file: str = ""  # the file name inside the folder


def slug(title: str, limit: int = 60) -> str:
    """A safe file-name part: ASCII letters, digits and dashes. Example: slug("../Über Plan!")
    ->  "uber-plan" """
    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode().lower()
    return "-".join(re.findall(r"[a-z0-9]+", ascii_text))[:limit].strip("-") or "untitled"


def _clean(title, type, tags) -> tuple[str, list[str]]:
    # split/join, so no newline can reach the front matter or the index
    title = " ".join(check_text(str(title), "title", UserError).split())
    if not title or len(title) > MAX_TITLE:
        raise UserError(
            f"a note needs a title of 1-{MAX_TITLE} characters — say what the note is about"
        )
    if type not in TYPES:
        raise UserError(f"note type {type!r} is unknown — use one of {', '.join(TYPES)}")
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise UserError("tags must be a list of words, e.g. ['billing', 'db']")
    check_text(list(tags), "tags", UserError)
    return title, sorted({" ".join(t.split()).lower() for t in tags if t.strip()})


def _body(body):
    return check_text(str(body), "body", UserError)


class NoteBook:
    """A folder of notes for one long task.
    Example: book = NoteBook("notes"); book.create("Plan", "Step 1 ...")"""

    def __init__(self, folder: str | Path, clock: Callable[[], float] = time.time):
        self.folder, self.clock = Path(folder), clock
        self.folder.mkdir(parents=True, exist_ok=True)

    def __repr__(self):
        return f"NoteBook({self.folder.name!r}, {len(self.list())} notes)"

    def _files(self):
        return sorted(
            (p for p in self.folder.glob("n*.md") if _NAME.fullmatch(p.name)),
            key=lambda p: int(_NAME.fullmatch(p.name).group(1)[1:]),
        )

    def _path(self, id):
        required_id(id, "id", "pass a note id such as 'n1'; book.list() shows them")
        if not re.fullmatch(r"n\d+", id):
            raise UserError(f"{id!r} is not a note id — ids look like 'n1'; see book.list()")
        found = [p for p in self._files() if p.name.startswith(id + "-")]
        if not found:
            raise UserError(f"there is no note {id!r} — see book.list() for the ids")
        return found[0]

    def _save(self, note, old_path=None):
        note.file = f"{note.id}-{slug(note.title)}.md"
        path = self.folder / note.file
        assert path.resolve().parent == self.folder.resolve()  # the slug cannot leave the folder
        head = {
            k: getattr(note, k) for k in ("id", "title", "type", "tags", "created_at", "updated_at")
        }
        text = (
            "---\n"
            + yaml.safe_dump(
                head, sort_keys=False, allow_unicode=True, width=1000, default_flow_style=None
            )
            + "---\n\n"
            + note.body
        )
        temporary = path.with_suffix(".tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)  # a crash leaves the old note or the new one, never half
        if old_path and old_path != path:
            old_path.unlink()
        self._write_index()
        return note

    def _load(self, path):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            text = None  # raised below, so the decoder's error is not its __context__
        if text is None:
            raise UserError(
                f"note file {path.name} is not UTF-8 text — save it as UTF-8, or delete it"
            )
        head, sep, body = text[4:].partition("\n---\n")
        try:
            meta = yaml.safe_load(head) if text.startswith("---\n") and sep else None
        except yaml.YAMLError:
            meta = None
        if not isinstance(meta, dict) or not {"id", "title", "type"} <= set(meta):
            raise UserError(
                f"note file {path.name} has broken front matter — fix the YAML between the "
                "--- lines (it needs id, title, type)"
            )
        return Note(
            str(meta["id"]),
            str(meta["title"]),
            meta["type"],
            list(meta.get("tags") or []),
            str(meta.get("created_at", "")),
            str(meta.get("updated_at", "")),
            body.removeprefix("\n"),
            path.name,
        )

    def _next_number(self):
        """The next id's number: the counter's, but never at or below a note on disk.

        Without .next_id (a folder from before it, or a deleted counter) numbering goes on after the
        newest note.
        """
        files = self._files()
        after_files = int(_NAME.fullmatch(files[-1].name).group(1)[1:]) + 1 if files else 1
        counter = self.folder / COUNTER
        if not counter.exists():
            return after_files
        found = re.fullmatch(r"n(\d+)", counter.read_text(encoding="utf-8").strip())
        if not found:
            raise UserError(
                f"the note counter {COUNTER} is broken — it should hold the next id, e.g. n4; "
                "write the next unused id into it"
            )
        return max(int(found.group(1)), after_files)

    def create(
        self, title: str, body: str = "", type: str = "task_state", tags: Iterable[str] = ()
    ) -> Note:
        """Write a new note; its id was never used before.
        Example: book.create("Migrate billing DB", tags=["db"])"""
        title, tags, body = *_clean(title, type, tags), _body(body)  # before the counter moves
        number = self._next_number()
        # count on before the note is written: a crash in between skips an id, never reuses one
        temporary = self.folder / (COUNTER + ".tmp")
        temporary.write_text(f"n{number + 1}\n", encoding="utf-8")
        os.replace(temporary, self.folder / COUNTER)
        now = iso(self.clock())
        return self._save(Note(f"n{number}", title, type, tags, now, now, body))

    def read(self, id: str) -> Note:
        """One note by id. Example: book.read("n1").body"""
        return self._load(self._path(id))

    def update(
        self,
        id: str,
        *,
        title: str | None = None,
        body: str | None = None,
        type: str | None = None,
        tags: Iterable[str] | None = None,
    ) -> Note:
        """Change a note's fields; the rest stay.
        Example: book.update("n1", body="Copied 5 of 5 tables")"""
        path = self._path(id)
        note = self._load(path)
        note.title, note.tags = _clean(
            note.title if title is None else title,
            note.type if type is None else type,
            note.tags if tags is None else tags,
        )
        note.type = note.type if type is None else type
        note.body = note.body if body is None else _body(body)
        note.updated_at = iso(self.clock())
        return self._save(note, old_path=path)

    def delete(self, id: str) -> None:
        """Remove a note. Example: book.delete("n3")"""
        self._path(id).unlink()
        self._write_index()

    def list(self, type: str | None = None, tag: str | None = None) -> list[Note]:
        """Every note, in id order, optionally of one type or with one tag.
        Example: book.list(type="blocker")"""
        notes = [self._load(p) for p in self._files()]
        return [
            n
            for n in notes
            if (type is None or n.type == type) and (tag is None or tag.lower() in n.tags)
        ]

    def search(self, query: str, limit: int = 5) -> builtins.list[tuple[float, Note]]:
        """Notes sharing keywords with the query, best first, as (relevance, note).
        Example: book.search("billing")"""
        if not isinstance(query, str):
            raise UserError(
                f"the query must be text, got {type(query).__name__} — search with "
                "words, e.g. 'billing'"
            )
        words = set(tokens(query))
        if not words:
            raise UserError(
                f"the query {query!r} has no keywords — search with words, e.g. 'billing'"
            )
        notes = self.list()
        terms = [set(tokens(f"{n.title} {' '.join(n.tags)} {n.body}")) for n in notes]
        weight = {w: idf(sum(w in t for t in terms), len(notes)) for w in words}
        total = sum(weight.values())
        scored = [
            (sum(weight[w] for w in words & t) / total, n)
            for n, t in zip(notes, terms, strict=True)
        ]
        scored = [pair for pair in scored if pair[0] > 0]
        return sorted(scored, key=lambda pair: (-pair[0], int(pair[1].id[1:])))[:limit]

    def _write_index(self):
        rows = [
            f"| {n.id} | {n.type} | {clip(n.title.replace('|', '/'), 80)} | {', '.join(n.tags)} | "
            f"{n.updated_at[:10]} "
            f"| [{n.file}]({n.file}) |"
            for n in self.list()
        ]
        text = "# Notes\n\nRead this first; open a note for its details.\n\n"
        text += (
            "| id | type | title | tags | updated | file |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows)
            + "\n"
        )
        (self.folder / INDEX).write_text(text, encoding="utf-8")

    def index(self) -> str:
        """The index as text (what a model reads first). Example: print(book.index())"""
        return (
            (self.folder / INDEX).read_text(encoding="utf-8")
            if (self.folder / INDEX).exists()
            else ""
        )
