"""In headless Chromium, a site built by `mkdocs build --strict` from records and a plan whose
every text field carries link, HTML and attribute payloads: no element on any page has a live
javascript:/data:/vbscript: link or source, an event handler, a frame or plugin, or a script
that is not Material's own; nothing runs. And a template that tries to run code or read a file
fails with one line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kbgen
from tests.conftest import REPO
from tests.site.conftest import mkdocs, serve
from tests.support.hostile import write_hostile_kb

# run in every page once it has loaded: what a browser would follow, run or embed
AUDIT = """() => {
  const bad = [];
  const urls = ["href", "src", "action", "formaction", "xlink:href", "data", "poster",
                "background", "cite", "ping", "codebase", "longdesc"];
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase();
      if (name.startsWith("on") || name === "srcdoc") bad.push(`${el.tagName} ${name}`);
      if (urls.includes(name) || name.endsWith(":href")) {
        let scheme;
        try { scheme = new URL(attr.value, document.baseURI).protocol; }
        catch { scheme = "unparsable"; }
        if (!["http:", "https:", "mailto:"].includes(scheme))
          bad.push(`${el.tagName} ${name}=${attr.value}`);
      }
      if (["srcset", "style"].includes(name) && /javascript:|data:|vbscript:/i.test(attr.value))
        bad.push(`${el.tagName} ${name}=${attr.value}`);
    }
    if (["IFRAME", "FRAME", "OBJECT", "EMBED", "APPLET", "BASE", "PORTAL"]
        .includes(el.tagName)) bad.push(el.tagName);
    if (el.tagName === "META" && el.httpEquiv) bad.push(`META http-equiv=${el.httpEquiv}`);
  }
  const scripts = [...document.scripts].map((s) => s.src
    ? "src " + new URL(s.src).pathname.replace(/^.*\\/assets\\//, "assets/")
    : `${s.type || "text/javascript"} ${s.id} ` +
      s.textContent.replace(/new URL\\("[^"]*",location\\)/g, "new URL(BASE,location)"));
  return {bad, scripts};
}"""


pytestmark = pytest.mark.slow  # two whole sites built: not in the fast lane


def _build(root: Path) -> Path:
    built = mkdocs("build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(root / "site"))
    assert built.returncode == 0, built.stderr
    return root / "site"


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The hostile site, and the example's (built the same way: its scripts are Material's)."""
    built = []
    for name in ("hostile", "clean"):
        root = tmp_path_factory.mktemp(name)
        shutil.copytree(REPO / "docs", root / "docs")
        shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
        if name == "hostile":
            write_hostile_kb(root / "records")
        else:
            shutil.copytree(REPO / "records", root / "records")
        built.append(_build(root))
    return built[0], built[1]


def _pages(site: Path) -> list[str]:
    return sorted(p.parent.relative_to(site).as_posix() for p in site.rglob("index.html"))


def _audit(browser: Any, base: str, pages: list[str], dialogs: list[str]) -> dict[str, Any]:
    page = browser.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    found = {}
    for rel in pages:
        page.goto(f"{base}/{'' if rel == '.' else rel + '/'}", wait_until="load")
        found[rel] = page.evaluate(AUDIT)
    page.close()
    return found


@pytest.fixture(scope="module")
def audits(
    sites: tuple[Path, Path], browser: Any
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    dialogs: list[str] = []
    hostile, clean = sites
    results = []
    for site in (hostile, clean):
        served = serve(site)
        base = next(served)
        results.append(_audit(browser, base, _pages(site), dialogs))
        next(served, None)  # shuts the server down
    return results[0], results[1], dialogs


def test_every_hostile_record_and_the_plan_have_their_pages(sites: tuple[Path, Path]) -> None:
    pages = _pages(sites[0])
    hostile = [p for p in pages if re.fullmatch(r"records/hostile-\d+", p)]
    assert len(hostile) == len(list((sites[0].parent / "records").glob("hostile-*.yaml")))
    assert "plans/hostile-plan" in pages and "records" in pages and "tags" in pages


def test_no_live_link_handler_frame_or_foreign_script_on_any_page(
    audits: tuple[dict[str, Any], dict[str, Any], list[str]],
) -> None:
    hostile, clean, dialogs = audits
    assert {rel: r["bad"] for rel, r in hostile.items() if r["bad"]} == {}
    materials = {script for r in clean.values() for script in r["scripts"]}
    foreign = {rel: set(r["scripts"]) - materials for rel, r in hostile.items()}
    assert {rel: s for rel, s in foreign.items() if s} == {}
    assert dialogs == []  # no alert(1) ran, on the hostile pages or while searching them


def test_search_results_of_hostile_pages_run_nothing(
    browser: Any, sites: tuple[Path, Path]
) -> None:
    served = serve(sites[0])
    base = next(served)
    dialogs: list[str] = []
    page = browser.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{base}/records/", wait_until="networkidle")
    page.locator(".md-search__input").first.click()
    page.keyboard.type("onerror", delay=20)
    page.locator(".md-search-result__item").first.wait_for(timeout=15_000)
    assert page.evaluate(AUDIT)["bad"] == [] and dialogs == []
    page.close()
    next(served, None)


def test_the_payloads_are_on_the_pages_as_text(sites: tuple[Path, Path]) -> None:
    page = (sites[0] / "records" / "hostile-0" / "index.html").read_text()
    assert "[inline](javascript:alert(1))" in page  # the title, shown as typed
    assert "javascript:alert" not in re.sub(r">[^<]*<", "><", page)  # in no tag, only text


def _kbgen(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(kbgen.__file__).parents[1])}
    command = [str(Path(sys.executable).with_name("kbgen")), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "template",
    [
        "{{ cycler.__init__.__globals__.os.popen('echo pwned-by-template').read() }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        '{% include "../../../../../../etc/hostname" %}',
        '{% include "leak.j2" %}',
    ],
)
def test_a_template_that_runs_code_or_reads_a_file_fails_with_one_line(
    template: str, tmp_path: Path
) -> None:
    write_hostile_kb(tmp_path / "records")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "record.md.j2").write_text(f"# page\n{template}\n")
    (tmp_path / "templates" / "leak.j2").symlink_to("/etc/hostname")
    done = _kbgen("render", "--templates", "templates", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: templates/record.md.j2:2: ")
    written = "".join(p.read_text() for p in (tmp_path / "docs").rglob("*.md"))
    assert "pwned-by-template" not in written + done.stdout + done.stderr
    hostname = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").exists() else ""
    assert len(hostname) < 6 or hostname not in written + done.stderr
