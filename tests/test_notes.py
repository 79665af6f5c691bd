"""labkit.notes: Markdown notes with YAML front matter, an index, and file names safe from any
title."""

import re

import pytest
import yaml

from labkit import UserError
from labkit.memory import ManualClock
from labkit.notes import COUNTER, INDEX, TYPES, NoteBook, slug


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def book(tmp_path, clock):
    return NoteBook(tmp_path / "notes", clock=clock)


def test_create_writes_markdown_with_front_matter(book):
    note = book.create(
        "Migrate the billing DB", "Copied 3 of 5 tables.", type="task_state", tags=["DB", "billing"]
    )
    text = (book.folder / note.file).read_text(encoding="utf-8")
    assert note.file == "n1-migrate-the-billing-db.md"
    head, body = text.removeprefix("---\n").split("\n---\n", 1)
    assert yaml.safe_load(head) == {
        "id": "n1",
        "title": "Migrate the billing DB",
        "type": "task_state",
        "tags": ["billing", "db"],
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:00Z",
    }
    assert body == "\nCopied 3 of 5 tables."
    assert book.read("n1") == note


def test_update_changes_only_what_is_given_and_moves_updated_at(book, clock):
    book.create("Plan", "Step 1", type="action", tags=["x"])
    clock.advance(days=1)
    note = book.update("n1", body="Step 1 done; step 2 next")
    assert (note.title, note.type, note.tags) == ("Plan", "action", ["x"])
    assert (note.created_at, note.updated_at) == ("2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z")
    renamed = book.update("n1", title="Plan B", type="conclusion")
    assert renamed.file == "n1-plan-b.md" and not (book.folder / "n1-plan.md").exists()
    assert book.read("n1").body == "Step 1 done; step 2 next"


@pytest.mark.parametrize(
    "title, name",
    [
        ("../x", "n1-x.md"),
        ("a/b", "n1-a-b.md"),
        ("CON", "n1-con.md"),
        ("..", "n1-untitled.md"),
        ("🚀🔥", "n1-untitled.md"),
        ("C:\\Windows\\system32", "n1-c-windows-system32.md"),
        ("Café déjà vu", "n1-cafe-deja-vu.md"),
        ("x" * 300, "n1-" + "x" * 60 + ".md"),
        ("line\nbreak\x00nul", "n1-line-break-nul.md"),
    ],
)
def test_hostile_titles_give_safe_file_names_and_come_back_intact(book, title, name):
    note = book.create(title, "body")
    assert note.file == name
    assert sorted(p.name for p in book.folder.iterdir()) == sorted([name, INDEX, COUNTER])
    assert [p.parent for p in book.folder.parent.rglob("*") if p.is_file()] == [book.folder] * 3
    assert book.read("n1").title == " ".join(title.split())


@pytest.mark.parametrize("title", ["", "   ", "\n"])
def test_an_empty_title_is_a_clear_error(book, title):
    with pytest.raises(UserError, match="needs a title"):
        book.create(title, "body")
    assert book.list() == []


def test_bad_type_tags_and_ids_are_clear_errors(book):
    with pytest.raises(UserError, match="use one of task_state"):
        book.create("t", type="todo")
    with pytest.raises(UserError, match="tags must be a list"):
        book.create("t", tags="db")
    with pytest.raises(UserError, match="not a note id"):
        book.read("../n1")
    with pytest.raises(UserError, match="no note 'n9'"):
        book.read("n9")


NOT_IDS = [None, "", "   ", 3, ["n1"], " n1", "n1\n", "n\udcff"]
BY_ID = {
    "read": lambda book, id: book.read(id),
    "delete": lambda book, id: book.delete(id),
    "update": lambda book, id: book.update(id, body="Step 2 done"),
}


@pytest.mark.parametrize("method", BY_ID)
@pytest.mark.parametrize("bad", NOT_IDS)
def test_a_missing_or_blank_note_id_is_refused_naming_it_and_how(book, method, bad):
    book.create("Plan", "Step 1")
    with pytest.raises(UserError, match=r"^id .*— pass a note id such as 'n1'; book.list\(\)"):
        BY_ID[method](book, bad)
    assert [(n.id, n.body) for n in book.list()] == [("n1", "Step 1")]


@pytest.mark.parametrize(
    "fields, where",
    [
        ({"title": "Plan \ud83d"}, "title"),
        ({"body": "Caf\udce9"}, "body"),
        ({"tags": ["db", "\udcff"]}, "tags[1]"),
    ],
)
def test_text_utf8_cannot_encode_is_refused_before_anything_is_written(book, fields, where):
    with pytest.raises(UserError, match=rf"^{re.escape(where)} holds .* UTF-8 cannot encode"):
        book.create(**{"title": "Plan", **fields})
    assert sorted(p.name for p in book.folder.iterdir()) == []  # no note, no counter, no index
    book.create("Plan")
    with pytest.raises(UserError, match=rf"^{re.escape(where)} holds"):
        book.update("n1", **fields)
    assert book.create("Next").id == "n2" and book.read("n1").title == "Plan"


def test_a_note_file_that_is_not_utf8_is_a_clear_error(book):
    note = book.create("Fine")
    (book.folder / note.file).write_bytes(b"---\nid: n1\ntitle: caf\xe9\ntype: task_state\n---\n")
    with pytest.raises(UserError, match="not UTF-8 text"):
        book.read("n1")


def test_list_filters_by_type_and_tag(book):
    book.create("Schema copied", type="conclusion", tags=["db"])
    book.create("Waiting for access", type="blocker", tags=["ops"])
    book.create("Ask ops for access", type="action", tags=["ops", "db"])
    assert [n.id for n in book.list()] == ["n1", "n2", "n3"]
    assert [n.id for n in book.list(type="blocker")] == ["n2"]
    assert [n.id for n in book.list(tag="DB")] == ["n1", "n3"]
    assert set(TYPES) == {"task_state", "conclusion", "blocker", "action", "reference"}


def test_search_ranks_by_shared_keywords(book):
    book.create("Billing migration state", "Tables copied: invoices, payments.", tags=["db"])
    book.create("Vacation plan", "Book flights.")
    book.create("Payments blocker", "The payments table has a lock.", type="blocker")
    found = book.search("payments lock")
    assert [n.id for _, n in found] == ["n3", "n1"]
    assert found[0][0] == pytest.approx(1.0) and 0 < found[1][0] < 1
    assert book.search("unrelated words") == []
    with pytest.raises(UserError, match="no keywords"):
        book.search("the")


def test_the_index_lists_every_note_and_follows_changes(book):
    book.create("First | with a pipe", type="reference", tags=["a"])
    book.create("Second")
    index = book.index()
    assert "| n1 | reference | First / with a pipe | a |" in index
    assert "[n2-second.md](n2-second.md)" in index
    book.delete("n1")
    assert "n1" not in book.index() and "n2" in book.index()


def test_ids_keep_counting_and_files_survive_a_new_notebook_object(book, tmp_path, clock):
    for i in range(11):
        book.create(f"note {i}")
    again = NoteBook(tmp_path / "notes", clock=clock)
    assert [n.id for n in again.list()][-2:] == ["n10", "n11"]
    assert again.create("twelve").id == "n12"


def test_ids_are_never_reused_after_a_delete(book, tmp_path, clock):
    book.create("one")
    book.create("two")
    book.delete("n2")  # the newest note
    assert book.create("three").id == "n3"
    book.delete("n3")
    book.delete("n1")  # an empty folder still remembers the count
    assert NoteBook(tmp_path / "notes", clock=clock).create("four").id == "n4"
    assert [n.id for n in book.list()] == ["n4"]
    with pytest.raises(UserError, match="there is no note 'n2'"):
        book.read("n2")  # an old link to n2 stays dead, never a new note


def test_a_folder_without_a_counter_goes_on_after_its_newest_note(book):
    book.create("one")
    book.create("two")
    (book.folder / COUNTER).unlink()  # a folder from before the counter, say
    assert book.create("three").id == "n3"
    (book.folder / COUNTER).write_text(
        "n2\n", encoding="utf-8"
    )  # a stale counter cannot collide either
    assert book.create("four").id == "n4"
    (book.folder / COUNTER).write_text("four\n", encoding="utf-8")
    with pytest.raises(UserError, match="note counter .next_id is broken"):
        book.create("five")


def test_a_hand_broken_note_is_a_clear_error(book):
    note = book.create("Fine")
    (book.folder / note.file).write_text("---\ntitle: [unclosed\n---\nbody", encoding="utf-8")
    with pytest.raises(UserError, match="broken front matter"):
        book.read("n1")


def test_slug():
    assert slug("../Über Plan!") == "uber-plan"
    assert slug("") == "untitled"
    assert len(slug("ab " * 100)) <= 60 and not slug("ab " * 100).endswith("-")
