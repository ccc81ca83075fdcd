"""`kbgen render` end to end: the stat-only no-op, parallel pages, nothing half-done on errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kbgen import build
from kbgen.errors import InvalidInput
from tests.conftest import RECORD


def test_nothing_changed_means_nothing_parsed(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    assert build.render_site(kb_dir, docs, cache=cache)
    from kbgen import kb as kb_stage

    real_load = kb_stage.load
    calls: list[object] = []
    monkeypatch.setattr(kb_stage, "load", lambda *a, **k: calls.append(a) or real_load(*a, **k))
    assert build.render_site(kb_dir, docs, cache=cache) == [] and calls == []
    (docs / "records" / "ngram-test.md").write_text("hand edit")  # an output changed: redo
    assert build.render_site(kb_dir, docs, cache=cache) == ["records/ngram-test.md"]
    record = kb_dir / "ngram-test.yaml"
    record.write_text(record.read_text().replace("Why we ran it.", "Why we ran it again."))
    assert build.render_site(kb_dir, docs, cache=cache) == ["records/ngram-test.md"]
    assert len(calls) == 2


def test_the_no_op_imports_no_yaml_pydantic_or_jinja(kb_dir: Path, tmp_path: Path) -> None:
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    build.render_site(kb_dir, docs, cache=cache)
    script = (
        "import sys, json; from pathlib import Path; from kbgen import build; "
        f"assert build.render_site(Path({str(kb_dir)!r}), Path({str(docs)!r}), "
        f"cache=Path({str(cache)!r})) == []; "
        "print(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert loaded.isdisjoint({"yaml", "ruamel", "pydantic", "jinja2"}), loaded


def test_many_records_render_in_parallel_like_one_by_one(kb_dir: Path, tmp_path: Path) -> None:
    from kbgen import kb, render

    for i in range(300):  # past kb.PARALLEL_FROM: worker processes render the pages
        rid = f"bulk-{i:03d}"
        (kb_dir / f"{rid}.yaml").write_text(RECORD.replace("id: ngram-test", f"id: {rid}"))
    assert len(list(kb_dir.glob("*.yaml"))) > kb.PARALLEL_FROM
    docs = tmp_path / "docs"
    build.render_site(kb_dir, docs, cache=None)
    expected = render.pages(kb.load([kb_dir]))
    assert render.differences(docs, expected) == []
    assert build.render_site(kb_dir, docs, cache=None) == []  # nothing rewritten


def test_an_invalid_record_fails_the_render_and_leaves_the_indexes(
    kb_dir: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    build.render_site(kb_dir, docs, cache=None)
    index = (docs / "records" / "index.md").read_bytes()
    (kb_dir / "broken.yaml").write_text(RECORD.replace("id: ngram-test", "id: broken") + "x: 1\n")
    with pytest.raises(InvalidInput, match=r"broken\.yaml:"):
        build.render_site(kb_dir, docs, cache=None)
    assert (docs / "records" / "index.md").read_bytes() == index
    assert not (docs / "records" / "broken.md").exists()


def test_check_writes_nothing(kb_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    stale = build.render_site(kb_dir, docs, check=True, cache=None)
    assert "records/ngram-test.md" in stale and "records/index.md" in stale
    assert not docs.exists()


def test_one_changed_record_is_the_only_one_parsed_again(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbgen import render

    for rid in ("second", "third"):
        (kb_dir / f"{rid}.yaml").write_text(RECORD.replace("id: ngram-test", f"id: {rid}"))
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    build.render_site(kb_dir, docs, cache=cache)
    real = render.rendered
    seen: list[str] = []
    monkeypatch.setattr(
        render, "rendered", lambda job, doc, path: seen.append(doc.id) or real(job, doc, path)
    )
    second = kb_dir / "second.yaml"
    second.write_text(second.read_text().replace("title: n-gram vs baseline", "title: renamed"))
    assert build.render_site(kb_dir, docs, cache=cache) == ["records/second.md", "records/index.md"]
    assert seen == ["second"]
    assert "| [renamed](second.md) |" in (docs / "records" / "index.md").read_text()
    # a plan's task text is on record pages: changing it renders every record again
    plan = kb_dir / "plans" / "next-steps.yaml"
    plan.write_text(plan.read_text().replace("Test n-gram speculative decoding", "Test n-gram"))
    seen.clear()
    build.render_site(kb_dir, docs, cache=cache)
    assert sorted(seen) == ["next-steps", "ngram-test", "second", "third"]
    assert "task `test-ngram`: Test n-gram\n" in (docs / "records" / "third.md").read_text()
