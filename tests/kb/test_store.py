"""The store: round-trip preservation, atomic writes, conflict detection."""

from __future__ import annotations

import datetime as dt
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbgen.errors import Conflict, InvalidInput
from kbgen.kb import files, store
from kbgen.kb import loading as kb
from kbgen.kb.models import Record
from tests.conftest import RECORD


def test_comments_and_order_survive_an_update(kb_dir: Path) -> None:
    path = kb_dir / "ngram-test.yaml"
    text = RECORD.replace("minimum_effect: 0.05", "minimum_effect: 0.05  # agreed with the team")
    path.write_text(text)
    doc = store.load_document(path)
    store.merge(
        doc.data,
        {
            "title": "n-gram vs baseline, re-run",
            "hypothesis": {"minimum_effect": 0.1},
            "measurements": {"baseline": {"coding": {"decode_tok_s": {"n": 20, "mean": 61.0}}}},
            "related": ["x-1"],
        },
    )
    store.save(doc)
    after = path.read_text()
    assert after.startswith("# a comment the author wrote\n")
    assert re.search(r"\n  minimum_effect: 0.1 +# agreed with the team\n", after)
    assert "title: n-gram vs baseline, re-run\n" in after
    assert "context: |\n  Why we ran it.\n" in after
    # untouched lines are byte-identical, in the same order
    untouched = [
        line
        for line in text.splitlines()
        if "title:" not in line
        and "minimum_effect" not in line
        and "decode_tok_s: {n: 10, mean: 62.6" not in line
        and line.strip()
    ]
    kept = [line for line in after.splitlines() if line in untouched]
    assert kept == untouched
    assert after.rstrip().endswith("related:\n  - x-1")
    reread = Record.model_validate(store.load_fast(path))
    assert reread.measurements["baseline"]["coding"]["decode_tok_s"].mean == 61.0


def test_multiline_strings_are_written_as_blocks(tmp_path: Path) -> None:
    text = store.dump({"context": "line one\nline two\n", "title": "t"})
    assert text == "context: |\n  line one\n  line two\ntitle: t\n"


def test_refuses_to_overwrite_a_file_changed_since_read(kb_dir: Path) -> None:
    path = kb_dir / "ngram-test.yaml"
    doc = store.load_document(path)
    path.write_text(RECORD.replace("n-gram vs baseline", "edited by someone else"))
    doc.data["title"] = "mine"
    with pytest.raises(Conflict, match="changed on disk since it was read"):
        store.save(doc)
    assert "edited by someone else" in path.read_text()


def test_new_document_never_clobbers(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    doc = store.new_document(path, {"id": "r"})
    path.write_text("id: theirs\n")
    with pytest.raises(Conflict, match="was created since it was read"):
        store.save(doc)
    with pytest.raises(Conflict, match="already exists"):
        files.write_atomic(path, b"id: mine\n", replace=False)
    assert path.read_text() == "id: theirs\n"
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_save_then_save_again(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    doc = store.new_document(path, {"id": "r", "n": 1})
    store.save(doc)
    doc.data["n"] = 2
    store.save(doc)  # the digest followed the first write
    assert path.read_text() == "id: r\nn: 2\n"


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kbgen.kb import store
    path = Path(sys.argv[1])
    for i in range(1_000_000):
        doc = store.load_document(path)
        doc.data["context"] = ("A" if i % 2 else "B") * 20_000 + "\\n"
        doc.data["title"] = "A" if i % 2 else "B"
        store.save(doc)
        if i == 1:
            print("writing", flush=True)
""")


def test_a_writer_killed_mid_save_leaves_every_record_intact(kb_dir: Path) -> None:
    path = kb_dir / "ngram-test.yaml"
    rng = random.Random(20261129)
    versions = set()
    for _ in range(12):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
        time.sleep(rng.uniform(0, 0.5))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        base = kb.load([kb_dir])  # leftover temporary files are hidden, so ignored
        assert base.problems == []
        record = base.records["ngram-test"]
        assert record.context in ("A" * 20_000 + "\n", "B" * 20_000 + "\n")
        assert record.title == record.context[0]
        versions.add(record.title)
    assert versions == {"A", "B"}  # the kills did land at different points


SCALARS = [
    "yes",
    "no",
    "on",
    "off",
    "y",
    "0o17",
    "017",
    "1_000",
    "1:20",
    ".5",
    "1e3",
    "1.0e+3",
    "2026-11-29",
    "2026-11-29T10:00:00Z",
    "2026-11-29 10:00:00",
    "~",
    "null",
    "",
    "0x1F",
    "+1",
    "-.inf",
    "0b101",
    "+.5",
    "1.",
    "007",
    "12e03",
    "True",
    "TRUE",
    "Null",
    "-0",
    "0.32.0",
    "'quoted'",
    '"2026-11-29"',
    "-0x1f",
    "+0o7",
]


@pytest.mark.parametrize("scalar", SCALARS)
def test_fast_and_round_trip_loaders_agree(tmp_path: Path, scalar: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(f"key: {scalar}\nlist: [{scalar}]\n")
    fast = store.load_fast(path)
    slow = store.plain(store.load_document(path).data)
    assert fast == slow
    assert type(fast["key"]) is type(slow["key"]) or isinstance(slow["key"], type(fast["key"]))


def test_fast_loader_refuses_duplicate_keys_like_the_round_trip_one(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("a:\n  b: 1\n  b: 2\n")
    with pytest.raises(InvalidInput, match="duplicate key"):
        store.load_fast(path)


def test_a_duplicate_key_is_named_without_its_values(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("env:\n  HF_TOKEN: S3cr3t-one\n  HF_TOKEN: S3cr3t-two\n")
    with pytest.raises(InvalidInput) as info:
        store.load_fast(path)
    assert str(info.value) == f'{path}:3: YAML syntax: found duplicate key "HF_TOKEN"'


DOCUMENTS = [
    "a: &x 1\nb: *x\n",  # anchors and aliases
    "a: !!str 1\nb: !!int '2'\n",  # explicit tags
    "base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n",  # a merge key
    "1: one\n2.5: two\n",  # keys that are not strings
    "a: [1, [2, {b: c}], {}]\nd: {e: [], f: null}\n",  # nested flow collections
    "a: |\n  literal\n  block\nb: >\n  folded\n  text\n",
    "a: ! 12\nb: '12'\nc: \"12\"\n",  # a non-specific tag and quoting keep strings
    "---\na: 1\n...\n",
    "a:\n- 1\n- x\n-\n",
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_fast_and_round_trip_loaders_agree_on_documents(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    assert store.load_fast(path) == store.plain(store.load_document(path).data)


def test_several_documents_are_refused_by_both_loaders(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("a: 1\n---\nb: 2\n")
    with pytest.raises(InvalidInput):
        store.load_fast(path)
    with pytest.raises(InvalidInput):
        store.load_document(path)


def test_a_typical_record_takes_the_fast_path() -> None:
    data = store._from_events(RECORD)  # raises _NotFast when it would fall back to ruamel
    assert data == store.plain(store.parse_text(RECORD))
    assert data["created"] == dt.date(2026, 11, 1) and data["schema_version"] == 1


EXAMPLE = sorted((Path(__file__).parents[2] / "records").rglob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLE, ids=lambda path: path.name)
def test_every_example_file_takes_the_fast_path(path: Path) -> None:
    """Records as kbgen writes them (lists of mappings, `per_unit` keyed by prompt index) are
    read by the fast path, to the same data as the round-trip loader's."""
    text = path.read_text()
    assert store._from_events(text) == store.plain(store.parse_text(text))


def test_integer_keys_are_text_on_both_paths_and_a_clash_falls_back(tmp_path: Path) -> None:
    text = "per_unit:\n  0: [1.5]\n  017: [2]\nspread:\n- {low: 1, high: 2}\n"
    assert store._from_events(text) == store.plain(store.parse_text(text))
    assert store._from_events(text)["per_unit"] == {"0": [1.5], "17": [2]}
    with pytest.raises(store._NotFast):
        store._from_events("a:\n  1: x\n  '1': y\n")


def _locations(data: Any, prefix: list[str | int]) -> Iterator[list[str | int]]:
    yield [*prefix, "missing"]
    items = data.items() if isinstance(data, dict) else enumerate(data)
    for key, value in items:
        yield [*prefix, key]
        if isinstance(value, dict | list):
            yield from _locations(value, [*prefix, key])


@pytest.mark.parametrize("path", EXAMPLE, ids=lambda path: path.name)
def test_positions_from_events_are_ruamels(path: Path) -> None:
    """Every key, item and missing key of the example files is at the same line, and named the
    same, in the events' positions as in ruamel's round-trip tree."""
    fast, slow = store.positions(path), store.load_document(path).data
    assert isinstance(fast, store._Lines)
    for loc in _locations(slow, []):
        assert store.line_of(fast, loc) == store.line_of(slow, loc), loc


def test_positions_fall_back_to_ruamel_where_the_fast_path_does(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("a: &x\n  b: 1\nc: *x\n")
    assert store.line_of(store.positions(path), ["c"]) == (3, ["c"])
    assert not isinstance(store.positions(path), store._Lines)


MULTI_LINE = ["org/m\nrev \x10", "a\u2028b\nc", "a\x85\nb", "x\n\ty", "a\nb"]
MULTI_LINE += ["a\xa0\n👩\u200d💻\xad"]  # a non-breaking space, an emoji's joiner, a soft hyphen


@pytest.mark.parametrize("text", MULTI_LINE)
def test_a_multi_line_string_reads_back_as_written(text: str) -> None:
    """A literal block holds printable lines (tabs too); any other multi-line string is quoted,
    so a control character or an odd line break is escaped, never written raw."""
    assert store.plain(store.parse_text(store.dump({"k": text})))["k"] == text


def test_a_multi_line_string_of_printable_text_stays_a_literal_block() -> None:
    """A non-breaking space, a soft hyphen, an emoji joined by U+200D: printable to YAML."""
    assert store.dump({"k": "a\xa0b\n👩\u200d💻 \xad"}).startswith("k: |")


def test_a_dump_leaves_no_space_at_a_line_end_unless_it_is_content() -> None:
    """ruamel folds a long string at a space and keeps the space; `kbgen record --into` wrote
    such lines. A literal block's own trailing spaces are its text, and stay."""
    long = " ".join(f"word{i}" for i in range(60))
    block = "a line with two spaces at its end  \nand the next\n"
    text = store.dump({"rule": long, "items": [long, {"text": long}], "note": block})
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100
    assert [line for line in lines if line.endswith(" ")] == [
        "  a line with two spaces at its end  "
    ]
    assert store.plain(store.parse_text(text)) == {
        "rule": long,
        "items": [long, {"text": long}],
        "note": block,
    }
