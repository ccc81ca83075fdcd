"""The knowledge base built by each builder: MkDocs (`make site`) and Zensical, Material for
MkDocs' successor (`make site-zensical`), which reads mkdocs.yml but ignores its hooks, so
`kbgen render` alone must give it every page. The built pages carry what kbgen generated — the
plans' ticked tasks, the records' charts — and hostile text as text, and load nothing from
another host."""

from __future__ import annotations

import html as html_text
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

import kbgen
from tests.conftest import REPO
from tests.support import unrendered
from tests.support.hostile import hostile_record, problems

HOSTILE_ID = "2026-11-29-hostile"
HOSTILE = "<img src=x onerror=alert(1)> and [x](javascript:alert(1))"
CHART = re.compile(r'<svg\b[^>]*\bclass="kbgen-chart".*?</svg>', re.S)


BUILDS = {
    "mkdocs": ["mkdocs", "build", "--strict", "-f", "mkdocs.yml"],
    "zensical": ["zensical", "build", "--strict", "-f", "mkdocs.yml"],
}


def _run(program: str, *args: str, cwd: Path) -> None:
    """`program` from the venv under test, in `cwd` (the site's address and repository link
    unset); its output shown if it fails."""
    executable = Path(sys.executable).with_name(program)
    if not executable.exists():
        pytest.fail(f"no {executable}: `pip install -e '.[dev]'` installs it")
    env = {
        "NO_MKDOCS_2_WARNING": "1",
        "PATH": str(executable.parent),
        "PYTHONPATH": str(Path(kbgen.__file__).parents[1]),  # the kbgen under test, hook too
    }
    done = subprocess.run(
        [str(executable), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module", params=BUILDS)
def root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example knowledge base plus a hostile record, its pages rendered afresh by `kbgen
    render` (none of the repository's kept), built with --strict into site/ by each builder."""
    root = tmp_path_factory.mktemp(request.param)
    for name in ("docs", "records"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    for generated in ("records", "plans"):
        shutil.rmtree(root / "docs" / generated)
    record = hostile_record(HOSTILE_ID, HOSTILE, resolves=[])
    (root / "records" / f"{HOSTILE_ID}.yaml").write_text(yaml.safe_dump(record, allow_unicode=True))
    _run("kbgen", "render", cwd=root)
    _run(*BUILDS[request.param], cwd=root)
    return root


class _Article(HTMLParser):
    """A built page's article (its content, not the theme's): the task checkboxes, the links and
    the first heading's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ticks: list[bool] = []
        self.links: list[str] = []
        self.heading = ""
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "input" and found.get("type") == "checkbox":
            self.ticks.append("checked" in found)
        if tag == "a" and found.get("href") and "headerlink" not in (found.get("class") or ""):
            self.links.append(found["href"] or "")
        self._in.append("headerlink" if "headerlink" in (found.get("class") or "") else tag)

    def handle_endtag(self, tag: str) -> None:
        if self._in:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if "h1" in self._in and "headerlink" not in self._in:
            self.heading += data


def _built(root: Path, page: str) -> str:
    """The HTML built for `page` (a path under docs/, as `records/x.md`)."""
    path = root / "site" / page.removesuffix(".md").removesuffix("index")
    return (path / "index.html" if path.is_dir() else path).read_text()


def _article(html: str) -> _Article:
    start = html.index('<article class="md-content__inner')
    parser = _Article()
    parser.feed(html[start : html.index("</article>", start)])
    parser.close()
    return parser


def _pages(root: Path, folder: str) -> dict[str, str]:
    """The Markdown `kbgen render` wrote under docs/`folder`, by path under docs/."""
    docs = root / "docs"
    return {p.relative_to(docs).as_posix(): p.read_text() for p in (docs / folder).glob("*.md")}


def test_every_plan_page_shows_the_ticks_kbgen_rendered(root: Path) -> None:
    plans = {page: md for page, md in _pages(root, "plans").items() if "- [" in md}
    assert plans
    seen: set[bool] = set()
    for page, markdown in plans.items():
        rendered = [mark == "x" for mark in re.findall(r"^ *[-*] \[([ x])\] ", markdown, re.M)]
        seen |= set(rendered)
        assert _article(_built(root, page)).ticks == rendered, page
    assert seen == {True, False}  # the example's plans have both, ticked and not


def test_every_link_on_a_plan_page_reaches_a_built_page(root: Path) -> None:
    for page in _pages(root, "plans"):
        links = _article(_built(root, page)).links
        local = [link.split("#")[0] for link in links if not re.match(r"[a-z]+:", link)]
        assert local, page
        base = (root / "site" / page.removesuffix(".md").removesuffix("index")).resolve()
        for link in filter(None, local):
            assert (base / link / "index.html").exists() or (base / link).is_file(), link


def test_every_chart_reaches_the_html_intact(root: Path) -> None:
    records = _pages(root, "records")
    charts = {page: CHART.findall(md) for page, md in records.items()}
    assert sum(map(len, charts.values())) >= 2  # the example's records have charts
    for page, svgs in charts.items():
        assert CHART.findall(_built(root, page)) == svgs, page


def test_hostile_text_is_text_on_the_built_page(root: Path) -> None:
    page = f"records/{HOSTILE_ID}.md"
    html = _built(root, page)
    assert _article(html).heading == HOSTILE  # shown as typed, once escaped: not &lt;img
    assert f"<title>{html_text.escape(HOSTILE, quote=False)} - " in html
    clean = set(problems(_built(root, "records/2026-11-29-ngram-vs-baseline.md")))
    assert set(problems(html)) <= clean  # nothing live that the theme's own pages lack
    assert problems(html[html.index("<article") : html.index("</article>")]) == []
    assert "javascript:alert" not in re.sub(r">[^<]*<", "><", html)  # in no tag, only text


def test_the_site_loads_nothing_from_another_host(root: Path) -> None:
    """Offline use: no script, style sheet or font from a CDN on any page."""
    remote = re.compile(r'<(?:script|link|img)\b[^>]*\b(?:src|href)="(?:https?:)?//', re.I)
    pages = list((root / "site").rglob("*.html"))
    assert len(pages) > len(_pages(root, "records"))
    assert [p for p in pages if remote.search(p.read_text())] == []
    styles = "".join(p.read_text() for p in (root / "site").rglob("*.css"))
    assert not re.search(r"@import|url\((['\"]?)(https?:)?//", styles)


def test_no_built_page_shows_markup_that_did_not_render(root: Path) -> None:
    """An extension a template relies on but mkdocs.yml lacks shows its markup as text (every
    record page once began its rule with a raw `??? note`)."""
    pages = sorted((root / "site").rglob("*.html"))
    assert len(pages) > len(_pages(root, "records"))
    found = {
        page.relative_to(root / "site").as_posix(): unrendered.leftovers(page.read_text())
        for page in pages
    }
    assert {page: left for page, left in found.items() if left} == {}


def test_the_unrendered_markup_check_finds_each_kind() -> None:
    html = (
        "<article><p>??? note &quot;The rule&quot;</p><p>!!! warning</p><ul><li>[x] done</li>"
        "<li><input type=checkbox checked> ticked</li></ul><p>a {: .wide} list</p>"
        "<p>{{ record.title }}</p><td>{% if x %}</td><pre>{{ shown }} ??? as code</pre>"
        "<p>text <code>{: .x}</code> inline</p></article>"
    )
    assert unrendered.leftovers(html) == [
        '??? note "The rule"',
        "!!! warning",
        "[x] done",
        "a {: .wide} list",
        "{{ record.title }}",
        "{% if x %}",
    ]


@pytest.fixture(scope="module", params=BUILDS)
def started(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository `kbgen init` started, with one record, built by each builder."""
    root = tmp_path_factory.mktemp(f"init-{request.param}")
    _run("kbgen", "init", cwd=root)
    record = hostile_record(HOSTILE_ID, "A first record", resolves=[])
    (root / "records" / f"{HOSTILE_ID}.yaml").write_text(yaml.safe_dump(record, allow_unicode=True))
    _run("kbgen", "render", cwd=root)
    _run(*BUILDS[request.param], cwd=root)
    return root


def test_the_site_kbgen_init_starts_builds_and_renders_all_it_writes(started: Path) -> None:
    pages = sorted((started / "site").rglob("*.html"))
    built = {page.relative_to(started / "site").as_posix() for page in pages}
    assert {"index.html", "records/index.html", "plans/first-plan/index.html"} <= built
    assert f"records/{HOSTILE_ID}/index.html" in built
    found = {
        page.relative_to(started / "site").as_posix(): unrendered.leftovers(page.read_text())
        for page in pages
    }
    assert {page: left for page, left in found.items() if left} == {}
