"""`kbgen render` end to end: the stat-only no-op, parallel pages, nothing half-done on errors."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import kbgen
from kbgen.errors import InvalidInput
from kbgen.site import build
from tests.conftest import PLAN, RECORD
from tests.site.conftest import read_pages
from tests.support import special
from tests.support.processes import running


def test_nothing_changed_means_nothing_parsed(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    assert build.render_site(kb_dir, docs, cache=cache)
    from kbgen.kb import loading as kb_stage

    real_scan = kb_stage.scan
    calls: list[object] = []
    monkeypatch.setattr(kb_stage, "scan", lambda *a, **k: calls.append(a) or real_scan(*a, **k))
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
        "import sys, json; from pathlib import Path; from kbgen.site import build; "
        f"assert build.render_site(Path({str(kb_dir)!r}), Path({str(docs)!r}), "
        f"cache=Path({str(cache)!r})) == []; "
        "print(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))"
    )
    # the kbgen under test, whatever the working folder: PYTHONPATH may be relative
    env = {**os.environ, "PYTHONPATH": str(Path(kbgen.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
    )
    loaded = set(json.loads(done.stdout))
    assert loaded.isdisjoint({"yaml", "ruamel", "pydantic", "jinja2", "markdown", "nh3"}), loaded


@pytest.mark.slow  # over 10 s: not in the fast lane
def test_many_records_render_in_parallel_like_one_by_one(
    kb_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbgen.kb import pool

    for i in range(300):  # past pool.PARALLEL_FROM: worker processes render the pages
        rid = f"bulk-{i:03d}"
        (kb_dir / f"{rid}.yaml").write_text(RECORD.replace("id: ngram-test", f"id: {rid}"))
    assert len(list(kb_dir.glob("*.yaml"))) > pool.PARALLEL_FROM
    docs, serial = tmp_path / "docs", tmp_path / "serial"
    build.render_site(kb_dir, docs, cache=None)
    with monkeypatch.context() as patch:
        patch.setattr(pool, "PARALLEL_FROM", 10_000)
        build.render_site(kb_dir, serial, cache=None)
    # 300 record pages, 2 plans pages, the records index and its script, the pages' stylesheet
    assert read_pages(docs) == read_pages(serial) and len(read_pages(docs)) == 306
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


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the documents `build.render_file` is called with, in order."""
    real = build.render_file
    ids: list[str] = []
    monkeypatch.setattr(
        build, "render_file", lambda job, doc, path: ids.append(doc.id) or real(job, doc, path)
    )
    return ids


def test_one_changed_record_is_the_only_one_parsed_again(
    kb_dir: Path, tmp_path: Path, seen: list[str]
) -> None:
    for rid in ("second", "third"):  # each on its own model: not replications of each other
        text = RECORD.replace("id: ngram-test", f"id: {rid}")
        (kb_dir / f"{rid}.yaml").write_text(text.replace("{name: tiny}", f"{{name: {rid}}}"))
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    build.render_site(kb_dir, docs, cache=cache)
    seen.clear()  # what the first render parsed
    second = kb_dir / "second.yaml"
    second.write_text(second.read_text().replace("title: n-gram vs baseline", "title: renamed"))
    # the plan lists what the refuted records resolving its tasks rule out, by title
    changed = ["records/second.md", "plans/next-steps.md", "records/index.md"]
    assert build.render_site(kb_dir, docs, cache=cache) == changed
    assert seen == ["second"]
    assert "| [renamed](second.md) |" in (docs / "records" / "index.md").read_text()
    # a plan's task text is on record pages: changing it renders every record again
    plan = kb_dir / "plans" / "next-steps.yaml"
    plan.write_text(plan.read_text().replace("Test n-gram speculative decoding", "Test n-gram"))
    seen.clear()
    build.render_site(kb_dir, docs, cache=cache)
    assert sorted(seen) == ["next-steps", "ngram-test", "second", "third"]
    assert "task `test-ngram`: Test n-gram\n" in (docs / "records" / "third.md").read_text()


def test_a_changed_record_renders_its_replications_pages_again(
    kb_dir: Path, tmp_path: Path, seen: list[str]
) -> None:
    """A record's page lists its replications, with their titles: renaming one renders the
    pages of the others again (they are read again), and only theirs."""
    for rid in ("second", "third"):  # the same setup as ngram-test: its replications
        (kb_dir / f"{rid}.yaml").write_text(RECORD.replace("id: ngram-test", f"id: {rid}"))
    (kb_dir / "other.yaml").write_text(
        RECORD.replace("id: ngram-test", "id: other").replace("{name: tiny}", "{name: other}")
    )
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    build.render_site(kb_dir, docs, cache=cache)
    seen.clear()
    second = kb_dir / "second.yaml"
    second.write_text(second.read_text().replace("title: n-gram vs baseline", "title: renamed"))
    build.render_site(kb_dir, docs, cache=cache)
    assert sorted(set(seen)) == ["ngram-test", "second", "third"]
    assert "renamed" in (docs / "records" / "third.md").read_text()
    assert "renamed" not in (docs / "records" / "other.md").read_text()
    seen.clear()
    assert build.render_site(kb_dir, docs, cache=cache) == []
    assert seen == []


def test_a_cold_render_parses_each_file_once_replications_and_all(
    kb_dir: Path, tmp_path: Path, seen: list[str]
) -> None:
    """Records of one question list each other: their pages are made where each was parsed,
    the replications filled in once every card is in, never by parsing a file again."""
    for rid in ("second", "third"):  # the same setup as ngram-test: its replications
        (kb_dir / f"{rid}.yaml").write_text(RECORD.replace("id: ngram-test", f"id: {rid}"))
    docs = tmp_path / "docs"
    build.render_site(kb_dir, docs, cache=None)
    assert sorted(seen) == ["next-steps", "ngram-test", "second", "third"]
    page = (docs / "records" / "third.md").read_text()
    assert "## Replications" in page and "](second.md)" in page and "\x00" not in page


def test_a_change_no_other_page_shows_parses_only_that_record(
    kb_dir: Path, tmp_path: Path, seen: list[str]
) -> None:
    """In a question of three, a record's context (on its own page only) changed: the others'
    cached cards give the same replications as before, so only that file is parsed again,
    and again after the next change."""
    for rid in ("second", "third"):  # the same setup as ngram-test: its replications
        (kb_dir / f"{rid}.yaml").write_text(RECORD.replace("id: ngram-test", f"id: {rid}"))
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    build.render_site(kb_dir, docs, cache=cache)
    second = kb_dir / "second.yaml"
    for words in ("Why we ran it, again.", "Why we ran it, once more."):
        seen.clear()
        second.write_text(second.read_text().replace("context:", f"context: {words}", 1))
        assert build.render_site(kb_dir, docs, cache=cache) == ["records/second.md"]
        assert seen == ["second"]


def test_a_user_record_template_shows_replications_where_it_likes(
    kb_dir: Path, tmp_path: Path, seen: list[str]
) -> None:
    """A user's own record.md.j2 may read `related` anywhere: its pages are rendered with
    their replications known (the files of records with replications parsed again)."""
    for rid in ("second", "third"):
        (kb_dir / f"{rid}.yaml").write_text(RECORD.replace("id: ngram-test", f"id: {rid}"))
    templates, docs = tmp_path / "templates", tmp_path / "docs"
    templates.mkdir()
    (templates / "record.md.j2").write_text(
        "# {{ record.title }}\n{% for o in related.others %}- {{ o.id }}\n{% endfor %}"
    )
    build.render_site(kb_dir, docs, templates, cache=None)
    listed = (docs / "records" / "third.md").read_text().splitlines()[1:]
    assert sorted(listed) == ["- ngram-test", "- second"]
    assert sorted(seen).count("third") == 2


def test_a_hand_edited_page_is_rendered_again_once(
    kb_dir: Path, tmp_path: Path, seen: list[str]
) -> None:
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    build.render_site(kb_dir, docs, cache=cache)
    seen.clear()  # what the first render parsed
    page = docs / "records" / "ngram-test.md"
    page.write_text("hand edit")
    assert build.render_site(kb_dir, docs, cache=cache) == ["records/ngram-test.md"]
    (docs / "records" / "index.md").write_text("hand edit")  # the next render is no no-op...
    assert build.render_site(kb_dir, docs, cache=cache) == ["records/index.md"]
    assert seen == ["ngram-test"]  # ...but the record, rendered again once, is trusted again


def test_a_leftover_generated_page_is_seen_even_when_nothing_else_changed(
    kb_dir: Path, tmp_path: Path
) -> None:
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    build.render_site(kb_dir, docs, cache=cache)
    leftover = docs / "records" / "gone.md"
    leftover.write_text("<!-- generated by kbgen render from records/gone.yaml -->\n")
    assert build.render_site(kb_dir, docs, check=True, cache=cache) == ["records/gone.md"]
    assert build.render_site(kb_dir, docs, cache=cache) == ["records/gone.md"]
    assert not leftover.exists()


def test_a_template_included_by_a_user_template_is_an_input(kb_dir: Path, tmp_path: Path) -> None:
    templates, docs, cache = tmp_path / "templates", tmp_path / "docs", tmp_path / "render.json"
    (templates / "parts").mkdir(parents=True)
    (templates / "plan.md.j2").write_text('# {{ plan.title }}\n{% include "parts/footer.txt" %}')
    (templates / "parts" / "footer.txt").write_text("old footer\n")
    build.render_site(kb_dir, docs, templates, cache=cache)
    (templates / "parts" / "footer.txt").write_text("new footer\n")
    assert build.render_site(kb_dir, docs, templates, cache=cache) == ["plans/next-steps.md"]
    assert (docs / "plans" / "next-steps.md").read_text().endswith("new footer\n")


def test_pages_do_not_depend_on_how_the_records_folder_was_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "records" / "project"  # a `records` folder above the project's own
    (project / "records" / "plans").mkdir(parents=True)
    (project / "records" / "plans" / "next-steps.yaml").write_text(PLAN)
    (project / "records" / "ngram-test.yaml").write_text(RECORD)
    monkeypatch.chdir(project)
    cache = project / "render.json"
    build.render_site(Path("records"), Path("docs"), cache=cache)
    page = (project / "docs" / "records" / "ngram-test.md").read_text()
    assert "generated by kbgen render from records/ngram-test.yaml" in page
    assert build.render_site(project / "records", project / "docs", cache=cache) == []
    assert build.render_site(project / "records", project / "docs", check=True, cache=None) == []


def test_a_record_linked_from_outside_the_knowledge_base_is_not_published(
    kb_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere" / "leak.yaml"
    outside.parent.mkdir()
    outside.write_text(RECORD.replace("id: ngram-test", "id: leak").replace("Why we", "SECRET"))
    (kb_dir / "leak.yaml").symlink_to(outside)
    docs = tmp_path / "docs"
    with pytest.raises(InvalidInput) as info:
        build.render_site(kb_dir, docs, cache=None)
    assert (
        str(info.value) == f"{kb_dir / 'leak.yaml'}: a symlink to a file outside {kb_dir}; not read"
    )
    assert not any("SECRET" in text for text in read_pages(docs).values())
    assert not (docs / "records" / "leak.md").exists()


KILLS = 20
RECORDS = 300  # past pool.PARALLEL_FROM, so worker processes render; about 2 s a render here


def _tagged(tag: str) -> set[int]:
    """The live processes whose environment carries `tag`: every descendant of a process
    started with it, wherever it was reparented to, and however late it started."""
    found = set()
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get("KBGEN_TEST_TAG") == tag and running(process.pid):
                found.add(process.pid)
    return found


def _served(docs: Path) -> dict[str, str]:
    """The pages under `docs` that MkDocs would serve: not a hidden temporary file a kill left."""
    return {
        rel: text for rel, text in read_pages(docs).items() if not Path(rel).name.startswith(".")
    }


def _write_version(kb_dir: Path, version: str) -> None:
    for i in range(RECORDS):
        rid = f"bulk-{i:03d}"
        text = RECORD.replace("id: ngram-test", f"id: {rid}")
        (kb_dir / f"{rid}.yaml").write_text(text.replace("title: n-gram", f"title: {version}"))


def _once_workers_run(render: subprocess.Popen[bytes], within: float = 10.0) -> set[int]:
    """The processes `render` started, once its pool workers run (or it ended, or `within`
    seconds passed): more than the forkserver and the resource tracker."""
    deadline = time.monotonic() + within
    descendants: set[int] = set()
    while render.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            descendants = {p.pid for p in psutil.Process(render.pid).children(recursive=True)}
        if len(descendants) > 2:
            break
        time.sleep(0.02)
    return descendants


@pytest.mark.slow  # over 10 s: not in the fast lane
def test_render_killed_at_any_moment_leaves_no_process_and_no_torn_page(
    kb_dir: Path, tmp_path: Path
) -> None:
    """SIGKILL `kbgen render` KILLS times, at seeded moments, while it rewrites every page (the
    records switch between two versions): after each kill no process it started is left, and
    every page is the old version's or the new one's, whole."""
    from kbgen.kb import pool

    assert RECORDS > pool.PARALLEL_FROM
    versions = {}
    for version in ("one", "two"):
        _write_version(kb_dir, version)
        build.render_site(kb_dir, tmp_path / version, cache=None)
        versions[version] = read_pages(tmp_path / version)
    rng = random.Random(12)
    tag = f"kbgen-kill-{os.getpid()}"
    env = {**os.environ, "KBGEN_TEST_TAG": tag, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "kbgen", "render", "--records", str(kb_dir), "--docs"]
    docs, with_workers = tmp_path / "docs", 0
    try:
        for kill in range(KILLS):
            _write_version(kb_dir, ("one", "two")[kill % 2])
            render = subprocess.Popen([*command, str(docs)], env=env, stderr=subprocess.DEVNULL)
            descendants = _once_workers_run(render)  # then a seeded moment of their work
            time.sleep(rng.uniform(0.0, 0.5))
            descendants |= {p.pid for p in psutil.Process(render.pid).children(recursive=True)}
            with_workers += len(descendants) > 2  # more than the forkserver and resource tracker
            render.kill()
            render.wait()
            deadline = time.monotonic() + 10
            while (left := _tagged(tag) | set(filter(running, descendants))) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.05)
            assert not left, f"kill {kill}: {len(left)} process(es) left"
            for rel, text in _served(docs).items():
                assert text in (versions["one"].get(rel), versions["two"].get(rel)), rel
    finally:  # what a failure left behind: this test's processes only, by their tag
        for pid in _tagged(tag):
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
    assert with_workers >= KILLS // 2, f"only {with_workers} kills hit worker processes"
    subprocess.run([*command, str(docs)], env=env, check=True, capture_output=True)
    assert _served(docs) == versions[("one", "two")[(KILLS - 1) % 2]]


def test_a_killed_render_s_half_written_pages_are_removed_by_the_next(
    kb_dir: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    build.render_site(kb_dir, docs, cache=None)
    gone = special.gone_pid()
    abandoned = docs / "records" / f".index.md.{gone}.7.tmp"
    writing = docs / "records" / f".index.md.{os.getpid()}.8.tmp"  # a writer still at work
    abandoned.write_text("half a pa")
    writing.write_text("half a pa")
    assert build.render_site(kb_dir, docs, check=True) == ["records/" + abandoned.name]
    build.render_site(kb_dir, docs, cache=None)
    assert not abandoned.exists() and writing.exists()


HOME = (
    "# Our knowledge base\n\nText of its own.\n\n"
    "<!-- kbgen:home -->\n<!-- /kbgen:home -->\n\nMore.\n"
)


def test_the_home_page_s_block_is_kbgen_s_and_the_rest_its_author_s(
    kb_dir: Path, tmp_path: Path
) -> None:
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    docs.mkdir()
    (docs / "index.md").write_text(HOME)
    assert "index.md" in build.render_site(kb_dir, docs, cache=cache)
    page = (docs / "index.md").read_text()
    head, rest = page.split("<!-- kbgen:home -->\n", 1)
    block, tail = rest.split("<!-- /kbgen:home -->", 1)
    assert head + "<!-- kbgen:home -->\n" == HOME.split("<!-- /kbgen:home -->")[0]
    assert tail == "\n\nMore.\n"
    assert "1 record (1 refuted); the newest:" in block
    assert (
        "| [n-gram vs baseline](records/ngram-test.md) | refuted | -26.0% decode_tok_s |" in block
    )
    assert "- [Next steps](plans/next-steps.md): 1 of 2 tasks done" in block
    assert build.render_site(kb_dir, docs, cache=cache) == []  # filled once: stable
    (docs / "index.md").write_text(page.replace("Text of its own.", "Edited by hand."))
    assert build.render_site(kb_dir, docs, cache=cache) == []  # the author's part: theirs
    assert "Edited by hand." in (docs / "index.md").read_text()
    (kb_dir / "second.yaml").write_text(RECORD.replace("id: ngram-test", "id: second"))
    assert "index.md" in build.render_site(kb_dir, docs, check=True, cache=None)
    assert "index.md" in build.render_site(kb_dir, docs, cache=cache)
    assert "2 records (2 refuted)" in (docs / "index.md").read_text()


def test_a_home_page_without_the_block_is_left_alone(kb_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for text in ("# Ours\n", "# Ours\n<!-- kbgen:home -->\nno end marker\n"):
        (docs / "index.md").write_text(text)
        assert "index.md" not in build.render_site(kb_dir, docs, cache=None)
        assert (docs / "index.md").read_text() == text


def test_a_record_cannot_close_the_home_page_s_block(kb_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(HOME)
    record = kb_dir / "ngram-test.yaml"
    hostile = "title: <!-- /kbgen:home --> x <!-- kbgen:home -->"
    record.write_text(record.read_text().replace("title: n-gram vs baseline", hostile))
    build.render_site(kb_dir, docs, cache=None)
    page = (docs / "index.md").read_text()
    assert page.count("<!-- kbgen:home -->") == page.count("<!-- /kbgen:home -->") == 1
    assert page.endswith("<!-- /kbgen:home -->\n\nMore.\n")
    build.render_site(kb_dir, docs, cache=None)
    assert (docs / "index.md").read_text() == page


def test_a_home_block_added_after_a_render_is_filled_and_checked(
    kb_dir: Path, tmp_path: Path
) -> None:
    docs, cache = tmp_path / "docs", tmp_path / "render.json"
    assert build.render_site(kb_dir, docs, cache=cache)  # no docs/index.md yet
    (docs / "index.md").write_text("# Ours\n")
    assert build.render_site(kb_dir, docs, cache=cache) == []  # no block: nothing to do
    (docs / "index.md").write_text(HOME)  # the block added since, the cache still there
    assert build.render_site(kb_dir, docs, check=True, cache=cache) == ["index.md"]
    assert build.render_site(kb_dir, docs, cache=cache) == ["index.md"]
    assert "1 record (1 refuted)" in (docs / "index.md").read_text()


def test_a_symlinked_home_page_is_left_alone(kb_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "home.md").write_text(HOME)
    (docs / "index.md").symlink_to(docs / "home.md")
    assert "index.md" not in build.render_site(kb_dir, docs, cache=None)
    assert (docs / "index.md").is_symlink() and (docs / "home.md").read_text() == HOME
