"""Rendering: golden pages, escaping, self-ticking plans, deterministic and incremental output."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kbgen.cli import cli
from kbgen.site import build, render
from tests.conftest import PLAN, RECORD, REPO
from tests.site.conftest import Site, read_pages
from tests.support.committed import committed
from tests.support.figures import index_rows, linked
from tests.support.golden import assert_golden, golden_path
from tests.support.hostile import problems, to_html


def test_the_example_site_is_current(site: Site) -> None:
    """docs/ holds the pages of records/ beside it: the example's, and any record added since."""
    stale = build.render_site(REPO / "records", REPO / "docs", check=True, cache=None)
    assert stale == [], "run `kbgen render`"
    content = site(REPO / "records")  # a render from scratch agrees with it, page for page
    assert {rel: (REPO / "docs" / rel).read_text() for rel in content} == content


def test_the_example_plan_is_ticked_by_its_records(tmp_path: Path, site: Site) -> None:
    records = committed(tmp_path, "records") / "records"  # not what `make demo` adds
    plan = site(records)["plans/next-steps-eagle.md"]
    assert plan.count("- [x] ") == 2 and plan.count("- [ ] ") == 3


def test_golden_pages_of_a_measured_record(kb_dir: Path, site: Site) -> None:
    content = site(kb_dir)
    for name in (
        "records/ngram-test.md",
        "plans/next-steps.md",
        "records/index.md",
    ):
        assert_golden(content[name], golden_path(name))


PAYLOADS = {
    "title": 'Evil <script>alert("title")</script> title',
    "context": "Context <img src=x onerror=alert(1)> and [a link](javascript:alert(2)) "
    "and [fine](https://example.org) <b>bold</b>",
}


def test_html_from_a_record_is_inert(kb_dir: Path, site: Site) -> None:
    text = RECORD.replace("title: n-gram vs baseline", f"title: '{PAYLOADS['title']}'")
    text = text.replace("  Why we ran it.", f"  {PAYLOADS['context']}")
    (kb_dir / "ngram-test.yaml").write_text(text)
    content = site(kb_dir)
    page = content["records/ngram-test.md"]
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert '&lt;script&gt;alert("title")&lt;/script&gt;' in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "javascript:" not in page and "and a link and" in page  # its text, no link
    assert "[fine](https://example.org)" in page
    assert "<script" not in content["records/index.md"]
    assert "<script" not in content["plans/next-steps.md"]


def test_plan_ticks_from_concluded_records_and_flags_superseded_evidence(
    kb_dir: Path, site: Site
) -> None:
    plan = site(kb_dir)["plans/next-steps.md"]
    assert re.search(
        r"- \[x\] Test n-gram speculative decoding — \[n-gram vs baseline\]"
        r"\(\.\./records/ngram-test\.md\): \*\*refuted\*\*",
        plan,
    )
    assert "- [ ] Train a draft model\n" in plan

    newer = (
        RECORD.replace("id: ngram-test", "id: ngram-rerun")
        .replace("title: n-gram vs baseline", "title: n-gram re-run")
        .replace("- next-steps#test-ngram", "- next-steps#train-draft")
        .replace("tags: [ngram]", "tags: [ngram]\nsupersedes: [ngram-test]")
    )
    (kb_dir / "ngram-rerun.yaml").write_text(newer)
    plan = site(kb_dir)["plans/next-steps.md"]
    assert "- [x] Test n-gram" not in plan
    assert re.search(
        r"- \[ \] Test n-gram speculative decoding — ⚠️ its evidence, "
        r"\[n-gram vs baseline\].*was superseded by \[n-gram re-run\]",
        plan,
    )
    assert "- [x] Train a draft model — [n-gram re-run]" in plan


def test_planned_records_tick_nothing(kb_dir: Path, site: Site) -> None:
    planned = (
        "schema_version: 1\nid: later\ntitle: Later\nstatus: planned\n"
        "created: 2026-11-29\nresolves: [next-steps#train-draft]\n"
    )
    (kb_dir / "later.yaml").write_text(planned)
    plan = site(kb_dir)["plans/next-steps.md"]
    assert "- [ ] Train a draft model\n" in plan


def test_rendering_is_deterministic_and_incremental(
    kb_dir: Path, tmp_path: Path, site: Site
) -> None:
    docs = tmp_path / "docs"
    written = build.render_site(kb_dir, docs, cache=None)
    first = read_pages(docs)
    assert first == site(kb_dir)
    assert len(written) == len(first)
    stamps = {p: p.stat().st_mtime_ns for p in docs.rglob("*") if p.is_file()}
    assert build.render_site(kb_dir, docs, cache=None) == []
    assert stamps == {p: p.stat().st_mtime_ns for p in docs.rglob("*") if p.is_file()}


def test_check_and_removal_of_pages_no_longer_produced(kb_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "records").mkdir(parents=True)
    (docs / "records" / "hand-written.md").write_text("# mine\n")
    args = ["render", "--records", str(kb_dir), "--docs", str(docs)]
    assert CliRunner().invoke(cli, [*args, "--check"]).exit_code == 1
    assert CliRunner().invoke(cli, args).exit_code == 0
    ok = CliRunner().invoke(cli, [*args, "--check"])
    assert ok.exit_code == 0, ok.output
    (kb_dir / "ngram-test.yaml").unlink()
    (kb_dir / "plans" / "next-steps.yaml").write_text(PLAN)
    stale = CliRunner().invoke(cli, [*args, "--check"])
    assert stale.exit_code == 1 and "ngram-test.md: stale" in stale.stderr
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert not (docs / "records" / "ngram-test.md").exists()
    assert (docs / "records" / "hand-written.md").exists()  # never generated: never removed


def test_user_templates_override(kb_dir: Path, tmp_path: Path, site: Site) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "plan.md.j2").write_text("# {{ plan.title }} (our template)\n")
    content = site(kb_dir, templates=tmp_path / "templates")
    assert content["plans/next-steps.md"] == "# Next steps (our template)\n"
    assert "## Verdict" in content["records/ngram-test.md"]  # others stay kbgen's


@pytest.mark.parametrize(
    ("value", "expected"),
    [("a|b", "a\\|b"), ("<i>x</i>", "&lt;i&gt;x&lt;/i&gt;"), ("two\nlines", "two lines")],
)
def test_table_cells(value: str, expected: str) -> None:
    assert render.to_page(value) == expected


def test_classes_that_disagree_stay_visible_on_every_page(kb_dir: Path, site: Site) -> None:
    path = kb_dir / "ngram-test.yaml"
    path.write_text(
        path.read_text()
        .replace("outcome: refuted\n  variant", "outcome: mixed\n  variant")
        .replace(
            "    coding: {outcome: refuted, effect: -0.26, ci_low: -0.3, ci_high: -0.2}\n",
            "    coding: {outcome: refuted, effect: -0.26, ci_low: -0.3, ci_high: -0.2}\n"
            "    math: {outcome: supported, effect: 0.3, ci_low: 0.15, ci_high: 0.43}\n",
        )
    )
    pages = site(kb_dir)
    both = "(coding: refuted, math: supported)"
    assert f"| mixed {both} |" in pages["records/index.md"]
    assert f"**mixed** {both}\n" in pages["plans/next-steps.md"]
    assert '!!! question "Mixed: the classes disagree"' in pages["records/ngram-test.md"]


def test_classes_that_agree_are_not_repeated(kb_dir: Path, site: Site) -> None:
    pages = site(kb_dir)
    (row,) = index_rows(pages["records/index.md"])
    assert (row["Verdict"], row["Effect"]) == ("refuted", "-26.0% decode_tok_s")
    assert "**refuted**\n" in pages["plans/next-steps.md"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("primary_metric: decode_tok_s", "primary_metric: ttft_ms"),  # measured, not the primary
        ("    per_position_acceptance: [0.5, 0.3, 0.1, 0.05, 0.01]\n", ""),  # counters, no rates
    ],
    ids=["primary-metric-not-measured", "spec-decode-without-rates"],
)
def test_a_record_without_a_chart_renders_without_it(
    kb_dir: Path, site: Site, old: str, new: str
) -> None:
    assert old in RECORD
    (kb_dir / "ngram-test.yaml").write_text(RECORD.replace(old, new))
    page = site(kb_dir)["records/ngram-test.md"]
    assert "## Measurements" in page and "decode_tok_s" in page
    assert page.count('<figure class="kbgen-figure">') == 1  # the other chart is still drawn


def test_a_folder_name_cannot_close_the_generated_pages_comment(kb_dir: Path, site: Site) -> None:
    folder = kb_dir / "--><img src=x onerror=alert(1)> [x](javascript:alert(1))"
    folder.mkdir()
    (kb_dir / "ngram-test.yaml").rename(folder / "ngram-test.yaml")
    page = site(kb_dir)["records/ngram-test.md"]
    note = next(line for line in page.splitlines() if "generated by kbgen render" in line)
    assert note.startswith("<!-- ") and note.endswith(" -->") and note.count("-->") == 1
    assert problems(to_html(page)) == [] and "<img" not in to_html(page)


def test_the_index_shows_each_record_s_effect_as_its_record_says(
    tmp_path: Path, site: Site
) -> None:
    """The effect column: the primary metric's change, one class's or the range over classes,
    the very numbers of each record's verdict."""
    import yaml

    records = committed(tmp_path, "records") / "records"
    rows = {linked(row["Record"]): row for row in index_rows(site(records)["records/index.md"])}
    shown = 0
    for path in sorted(records.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        effects = [
            v["effect"] for v in ((data.get("verdict") or {}).get("per_class") or {}).values()
        ]
        cell = rows[data["id"]]["Effect"]
        if not effects:
            assert cell == "–"
            continue
        low, high = f"{min(effects):+.1%}", f"{max(effects):+.1%}"
        expected = low if low == high else f"{low} … {high}"
        assert cell == f"{expected} {data['hypothesis']['primary_metric']}", cell
        shown += 1
    assert shown >= 2


def test_the_page_shows_the_machine_and_the_software(kb_dir: Path, site: Site) -> None:
    gpu = (
        "hardware: {cpu: Intel Xeon Platinum 8480+, cpu_count: 16, host: lab-h200,"
        " accelerator: NVIDIA H200, count: 1, accelerator_memory_gib: 140.4}\n"
        "  software: {kbgen: 0.1.0, python: 3.12.3, torch: 2.11.0, cuda: '13.0',"
        " driver: 570.133.20}"
    )
    text = RECORD.replace("hardware: {cpu: test cpu}", gpu).replace(
        "tags: [ngram]\n",
        "tags: [ngram]\nworkload: {prompt_suite: bench/prompts/seed.jsonl,"
        f" prompt_suite_sha256: {'ab12' * 16}, classes: [coding]}}\n",
    )
    text = text.replace(
        "  source: measured\n",
        "  source: measured\n  tool: kbgen 0.1.0\n  host: lab-h200\n"
        "  notes: ['not in a git repository (or git was not installed): no commit recorded']\n",
    )
    (kb_dir / "ngram-test.yaml").write_text(text)
    page = site(kb_dir)["records/ngram-test.md"]
    assert "| Hardware | 1 × NVIDIA H200 (140.4 GiB); Intel Xeon Platinum 8480+, 16 CPUs |" in page
    assert (
        "| Software | torch 2.11.0 (CUDA 13.0), Python 3.12.3, NVIDIA driver 570.133.20, "
        "measured with kbgen 0.1.0 |" in page
    )
    assert "prompts bench/prompts/seed.jsonl (sha256 `ab12ab12ab12`…)" in page
    assert "- Recorded with kbgen 0.1.0 on lab-h200" in page
    assert "- not in a git repository (or git was not installed): no commit recorded" in page


def test_the_page_shows_the_steady_state_throughput_and_says_what_it_is(
    kb_dir: Path, site: Site
) -> None:
    steady = (
        "      decode_tok_s: {n: 10, mean: 46.4}\n"
        "      output_tok_s: {n: 1, mean: 1480.0}\n"
        "      steady_output_tok_s: {n: 1, mean: 1720.0}\n"
    )
    text = RECORD.replace("      decode_tok_s: {n: 10, mean: 46.4}\n", steady).replace(
        "tags: [ngram]\n",
        "tags: [ngram]\nworkload: {prompt_suite: s, classes: [coding], concurrency: 32}\n",
    )
    (kb_dir / "ngram-test.yaml").write_text(text)
    page = site(kb_dir)["records/ngram-test.md"]
    assert "| `steady_output_tok_s` (tok/s) | ngram | 1 | 1,720 |" in page
    assert "over each window's steady state, while all 32 streams were busy" in page
    (kb_dir / "ngram-test.yaml").write_text(RECORD)  # none measured: nothing said of it
    assert "steady state" not in site(kb_dir)["records/ngram-test.md"]


KBGEN_SHA, SPEC_SHA = "1a" * 20, "2b" * 20


@pytest.mark.parametrize(
    ("provenance", "lines"),
    [
        (
            f"kbgen: {{version: 0.1.0, commit: '{KBGEN_SHA}', commit_from: checkout}}\n"
            f"  git_sha: '{SPEC_SHA}'\n  spec_in_kbgen_checkout: false\n",
            [
                f"- Ran kbgen 0.1.0 at commit `{KBGEN_SHA}` (its git checkout)",
                f"- The spec from commit `{SPEC_SHA}` of its own git repository, not kbgen's "
                "checkout",
            ],
        ),
        (
            f"kbgen: {{version: 0.1.0, commit: '{KBGEN_SHA}', commit_from: checkout, "
            f"changed: true}}\n  git_sha: '{KBGEN_SHA}'\n  spec_in_kbgen_checkout: true\n"
            "  git_changed: true\n",
            [
                f"- Ran kbgen 0.1.0 at commit `{KBGEN_SHA}` (its git checkout, with changes that "
                "commit does not hold)",
                f"- The spec from commit `{KBGEN_SHA}` of kbgen's own checkout (the same commit), "
                "with changes that commit does not hold",
            ],
        ),
        (
            f"kbgen: {{version: 0.1.0, commit: '{KBGEN_SHA}', commit_from: direct_url}}\n",
            [
                f"- Ran kbgen 0.1.0 at commit `{KBGEN_SHA}` (installed from that commit, as its "
                "direct_url.json says)"
            ],
        ),
        ("kbgen: {version: 0.1.0}\n", ["- Ran kbgen 0.1.0, commit unknown"]),
        (  # a record made before kbgen named its own commit: the commit is the spec's alone
            f"git_sha: '{SPEC_SHA}'\n",
            [
                f"- The spec from commit `{SPEC_SHA}` of its git repository (kbgen's own commit "
                "was not recorded)"
            ],
        ),
    ],
    ids=["spec-elsewhere", "same-checkout-changed", "installed-from-vcs", "unknown", "older"],
)
def test_the_page_names_kbgen_s_commit_and_the_spec_s_apart(
    kb_dir: Path, site: Site, provenance: str, lines: list[str]
) -> None:
    text = RECORD.replace("  source: measured\n", f"  source: measured\n  {provenance}")
    (kb_dir / "ngram-test.yaml").write_text(text)
    page = site(kb_dir)["records/ngram-test.md"]
    shown = [line for line in page.splitlines() if line.startswith(("- Ran ", "- The spec "))]
    assert shown == lines


def test_sections_filled_in_later_make_the_page_rendering_with_them_does() -> None:
    """A page made before every card is in, its sections filled afterwards (`render.fill`), is
    byte for byte the page rendered with its replications known, for every example record."""
    from kbgen.kb import replications
    from kbgen.kb.cards import Card
    from tests.support.records import load_record

    paths = sorted((REPO / "records").glob("*.yaml"))
    records = [load_record(path) for path in paths]
    records += [r.model_copy(update={"id": f"{r.id}-again"}) for r in records]  # replications
    found = replications.evidence(Card.of(r) for r in records)
    env = render.environment(None)
    assert any(found.related(r.id).others for r in records)  # the sections are not all empty
    for record in records:
        related, source = found.related(record.id), f"records/{record.id}.yaml"
        later = render.record_pages(env, record, source, {}, None)
        filled = render.fill(env, later, related, render.sections_of(record))
        assert filled == render.record_pages(env, record, source, {}, related)


def test_record_text_cannot_forge_a_section_marker(tmp_path: Path) -> None:
    """The markers are control characters, which no value from a record prints: a title and a
    context holding one render as text, and no section appears where they are."""
    marker = '"\\0kbgen:replications\\0 and \\0kbgen:warnings\\0"'
    text = RECORD.replace("title: n-gram vs baseline", f"title: {marker}", 1)
    (tmp_path / "records" / "plans").mkdir(parents=True)
    (tmp_path / "records" / "plans" / "next-steps.yaml").write_text(PLAN)
    (tmp_path / "records" / "ngram-test.yaml").write_text(text)
    build.render_site(tmp_path / "records", tmp_path / "docs", cache=None)
    page = (tmp_path / "docs" / "records" / "ngram-test.md").read_text()
    assert "\0" not in page and "kbgen:replications and kbgen:warnings" in page
    assert "## Replications" not in page


# --- the verdict box at the top of a record's page ---------------------------------------------


def verdict_box(page: str) -> str:
    """The admonition at the top of a record's page: its `!!!` line and its indented body."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("!!! "))
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith("    ")),
        len(lines),
    )
    return "\n".join(lines[start:end]).rstrip()


BOXED = RECORD.replace("outcome: refuted\n  variant", "outcome: inconclusive\n  variant").replace(
    "    coding: {outcome: refuted, effect: -0.26, ci_low: -0.3, ci_high: -0.2}\n",
    "    coding: {outcome: supported, effect: 0.452, ci_low: 0.085, ci_high: 1.102}\n"
    "    math: {outcome: inconclusive, effect: 0.305, ci_low: 0.092, ci_high: 0.522,\n"
    "           reason: the drift across rounds could change it}\n"
    "    explanatory: {outcome: inconclusive, effect: 0.115}\n"
    "  caveats:\n"
    "    - 'the servers ran differently beyond the arms'' arguments: async_scheduling disabled'\n"
    "    - 'coding: the arms generated different outputs for 2 of 10 prompts'\n"
    "    - 'coding: decided on the 8 prompts whose outputs agree'\n"
    "    - 'math: an arm drifted 47.0% across rounds'\n"
    "    - 'math: the drift across rounds could change it'\n"
    "    - '3 of 4 windows ran on a busy machine'\n",
)


def test_the_verdict_box_gives_each_class_its_effect_and_the_caveats(
    kb_dir: Path, site: Site
) -> None:
    """An inconclusive verdict with a supported class: the box shows every class's outcome,
    effect and interval as the record stores them, and what limits them, by class."""
    (kb_dir / "ngram-test.yaml").write_text(BOXED)
    page = site(kb_dir)["records/ngram-test.md"]
    assert verdict_box(page) == "\n".join(
        [
            '!!! warning "Inconclusive: not a pass"',
            "    ngram vs baseline, decided on `decode_tok_s`, which must increase by at least 5% "
            "(bootstrap).",
            "",
            "    | Class | Outcome | Effect | 95% interval |",
            "    |---|---|--:|---|",
            "    | coding | **supported** | +45.2% | +8.5% … +110.2% |",
            "    | math | **inconclusive** | +30.5% | +9.2% … +52.2% |",
            "    | explanatory | **inconclusive** | +11.5% | none |",
            "",
            "    Caveats:",
            "",
            "    - the servers ran differently beyond the arms' arguments: async_scheduling "
            "disabled",
            "    - 3 of 4 windows ran on a busy machine",
            "    - **coding**:",
            "        - the arms generated different outputs for 2 of 10 prompts",
            "        - decided on the 8 prompts whose outputs agree",
            "    - **math**:",
            "        - the drift across rounds could change it",
            "        - an arm drifted 47.0% across rounds",
        ]
    )
    assert page.index("!!! warning") < page.index("## Context")
    assert page.count("an arm drifted 47.0% across rounds") == 1  # said once, at the top
    html = to_html(page)
    assert problems(html) == []
    box = html[html.index('<div class="admonition warning">') : html.index("</div>")]
    assert (
        "<td>coding</td>" in box and "<li>decided on the 8 prompts whose outputs agree</li>" in box
    )


def test_the_verdict_box_of_every_example_record_shows_its_verdict_s_numbers(
    tmp_path: Path, site: Site
) -> None:
    """The box's rows are the record's `verdict.per_class`, to the precision shown, and every
    caveat the record states is in the box."""
    import yaml

    records = committed(tmp_path, "records") / "records"
    pages = site(records)
    for path in sorted(records.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if "step" in data:  # a step of work: no verdict, no box (a superseded one's note)
            head = pages[f"records/{data['id']}.md"].split("## Step", 1)[0]
            boxes = [line for line in head.splitlines() if line.startswith("!!! ")]
            superseded = data["status"] == "superseded"
            assert boxes == (['!!! note "Superseded"'] if superseded else []), boxes
            continue
        verdict = data["verdict"]
        if verdict.get("cells"):  # a sweep's box is its grid: the judged cells are per_class
            _the_grid_box_shows_the_verdict_s_numbers(pages[f"records/{data['id']}.md"], verdict)
            continue
        box = verdict_box(pages[f"records/{data['id']}.md"])
        rows = {
            cells[0]: cells[1:]
            for line in box.splitlines()
            if line.startswith("    | ") and not line.startswith(("    | Class", "    |---"))
            for cells in [line.strip().removeprefix("| ").removesuffix(" |").split(" | ")]
        }
        assert list(rows) == list(verdict["per_class"]), path.name
        for cls, v in verdict["per_class"].items():
            outcome, effect, interval = rows[cls]
            assert outcome == f"**{v['outcome']}**"
            assert effect == f"{v['effect']:+.1%}"
            ci = v.get("ci_low"), v.get("ci_high")
            assert interval == (f"{ci[0]:+.1%} … {ci[1]:+.1%}" if None not in ci else "none")
        for caveat in verdict.get("caveats", []):
            cls, _, rest = caveat.partition(": ")
            assert (rest if cls in verdict["per_class"] else caveat) in box, (path.name, caveat)


def _the_grid_box_shows_the_verdict_s_numbers(page: str, verdict: dict[str, Any]) -> None:
    """A sweep's box: the judged variant's cell of each class, with its outcome, effect and
    interval (on hover: the cell's title) as `per_class` holds them; every caveat listed."""
    import html

    box = html.unescape(page[page.index('<div class="admonition') : page.index("</div>\n\n")])
    judged = re.findall(
        r'<td class="kbgen-\S+ kbgen-judged" [^>]*data-class="([^"]+)" '
        r'data-outcome="([^"]+)" title="([^"]+)"',
        box,
    )
    assert [cls for cls, _, _ in judged] == list(verdict["per_class"])
    for cls, outcome, title in judged:
        v = verdict["per_class"][cls]
        low, high = v.get("ci_low"), v.get("ci_high")
        interval = "" if low is None or high is None else f" [{low:+.1%} … {high:+.1%}]"
        assert outcome == v["outcome"]
        assert title.endswith(f", {cls}: {outcome}, {v['effect']:+.1%}{interval}"), title
    for caveat in verdict.get("caveats", []):
        cls, _, rest = caveat.partition(": ")
        assert (rest if cls in verdict["per_class"] else caveat) in box, caveat


@pytest.mark.parametrize(
    "caveat",
    [
        "coding: <img src=x onerror=alert(1)> and [a](javascript:alert(2))",
        "coding: | a cell | breaking out |\n|---|---|",
        "coding: 1. a list\n    - nested\n!!! note",
        "<script>alert(1)</script>: not a class",
    ],
)
def test_a_caveat_in_the_box_is_text(kb_dir: Path, site: Site, caveat: str) -> None:
    text = RECORD.replace(
        "    coding: {outcome: refuted, effect: -0.26, ci_low: -0.3, ci_high: -0.2}\n",
        "    coding: {outcome: refuted, effect: -0.26, ci_low: -0.3, ci_high: -0.2}\n"
        f"  caveats: [{json.dumps(caveat)}, 'coding: another']\n",
    )
    (kb_dir / "ngram-test.yaml").write_text(text)
    page = site(kb_dir)["records/ngram-test.md"]
    html = to_html(page)
    assert problems(html) == [] and "<script" not in html and "<img" not in html
    box = html[html.index('<div class="admonition failure">') : html.index("</div>")]
    assert box.count("<table>") == 1 and box.count("<li>") >= 2  # the box still holds them


COST = """\
cost:
  design: when-decided
  starts: 3
  startup_minutes: 3.9
  server_minutes: 4.91
  accelerators: 2
  accelerator_minutes: 9.82
  window_minutes: 0.94
  windows: 4
  planned_windows: 12
  requests: 140
  output_tokens: 17920
  stopped: {round: 2, reason: decided}
  left: {ngram-k1: refuted in every class at every load by round 2}
  saved: {starts: 4, windows: 8, minutes: 7.08, accelerator_minutes: 14.16}
"""


def test_the_page_states_the_cost_and_the_index_sums_it(kb_dir: Path, site: Site) -> None:
    inconclusive = (
        "    coding: {outcome: inconclusive, effect: 0.03, ci_low: -0.02, ci_high: 0.08,"
        " unit: prompt, prompts: 12, prompts_needed: 48}\n"
    )
    text = RECORD.replace(
        "    coding: {outcome: refuted, effect: -0.26, ci_low: -0.3, ci_high: -0.2}\n",
        inconclusive,
    ).replace("  outcome: refuted\n", "  outcome: inconclusive\n")
    (kb_dir / "ngram-test.yaml").write_text(text + COST)
    pages = site(kb_dir)
    page = pages["records/ngram-test.md"]
    assert (
        "| stops when decided: stopped in round 2 | 3 | 3.9 min | 4.91 min | 9.82 (2 × servers "
        "up) | 4 of 12 |" in (page)
    )
    assert "- Stopped in round 2: every class of every comparison was decided." in page
    assert "- `ngram-k1` left the race: refuted in every class at every load by round 2." in page
    assert "about 7.08 minutes (14.2 accelerator-minutes)" in page
    # what would decide the inconclusive class, as a cost: 3.9 + 0.94 x 48 / 12 = 7.66 minutes
    assert (
        "About 36 more prompts would decide it: the same design with 48 prompts per class, "
        "about 7.66 min over 3 server starts, 15.3 accelerator-minutes." in page
    )
    # the "stopped when decided" of a run that never stopped: it says it ran every round
    unstopped = (kb_dir / "ngram-test.yaml").read_text()
    unstopped = unstopped.replace("  stopped: {round: 2, reason: decided}\n", "")
    (kb_dir / "ngram-test.yaml").write_text(
        unstopped.replace(
            "  left: {ngram-k1: refuted in every class at every load by round 2}\n", ""
        )
    )
    page = site(kb_dir)["records/ngram-test.md"]
    assert "| stops when decided: ran every round | 3 |" in page and "Stopped in round" not in page
    assert (
        "summed over the 1 measured record that states its cost: 3 server starts, "
        "4.91 server-minutes, 9.82 accelerator-minutes." in pages["records/index.md"]
    )


def test_a_server_s_start_up_phases_are_on_its_record_page_launch_by_launch() -> None:
    from kbgen.bench import effective, logline
    from tests.support.records import load_record

    record = load_record(REPO / "records" / "2026-12-01-ngram-vs-baseline-h200-c1-pinned.yaml")
    logs = REPO / "tests" / "fixtures" / "vllm-logs"
    read = effective.of_lines(logline.lines((logs / "h200-0.26-baseline.log").read_text()))
    assert read is not None
    record.effective["baseline"] = record.effective["baseline"].model_copy(
        update={"startup": read.startup}
    )
    page = "\n".join(render.record_pages(render.environment(None), record, "r.yaml", {}).values())
    row = next(line for line in page.splitlines() if line.startswith("| baseline | "))
    first, second = row.split(" | ")[2].split("; ")
    assert "torch.compile 18.9 s" in first and "torch.compile 3.5 s" in second
    assert "models 0.26 GiB" in first and "engine init 28.7 s" in second


def test_a_tensor_parallel_server_s_layout_is_on_its_record_page() -> None:
    """From the engine config each arm's log gave (`tests/fixtures/vllm-logs/cpu-0.32-tp2.log`,
    a real two-rank server); no row for single-rank servers, each arm's where they differ."""
    from kbgen.bench import effective, logline
    from tests.support.records import load_record

    record = load_record(REPO / "records" / "2026-12-01-ngram-vs-baseline-h200-c1-pinned.yaml")
    env = render.environment(None)
    page = "\n".join(render.record_pages(env, record, "r.yaml", {}).values())
    assert "Parallel layout" not in page  # one GPU, one rank
    logs = REPO / "tests" / "fixtures" / "vllm-logs"
    read = effective.of_lines(logline.lines((logs / "cpu-0.32-tp2.log").read_text()))
    assert read is not None
    tp = {"config": {**read.config, "pipeline_parallel_size": "2"}}
    record.effective = {arm: read for arm in record.effective}
    page = "\n".join(render.record_pages(env, record, "r.yaml", {}).values())
    assert "| Parallel layout | tensor-parallel 2 (one server, its ranks in processes" in page
    record.effective["ngram"] = read.model_copy(update=tp)
    page = "\n".join(render.record_pages(env, record, "r.yaml", {}).values())
    assert (
        "| Parallel layout | baseline: tensor-parallel 2; ngram: tensor-parallel 2 × "
        "pipeline-parallel 2 (one server" in page
    )


def test_a_step_s_record_shows_its_work_and_ticks_its_plan_task(tmp_path: Path) -> None:
    from kbgen.kb.cards import Card
    from kbgen.kb.models import Plan, Record
    from tests.kb.test_models import STEP

    record = Record.model_validate(STEP)
    env = render.environment(None)
    page = "\n".join(render.record_pages(env, record, "records/collect.yaml", {}).values())
    assert "## Step" in page and "no hypothesis, no verdict" in page
    assert "| `generated_tokens` | 614,400 |" in page and "| `generate_s` | 25.5 |" in page
    assert "| in | prompts | `/tmp/eagle3/prompts.jsonl` | – | – | 2400 |" in page
    assert "It took 2.2 minutes." in page
    assert f"| out | rows | `/tmp/eagle3/rows.jsonl` | `{'a' * 16}`… |" in page
    assert "## Verdict" not in page and "## Hypothesis" not in page
    plan = Plan.model_validate(
        {
            "schema_version": 1,
            "id": "plan",
            "title": "p",
            "tasks": [{"id": "collect-data", "text": "Collect the data"}, {"id": "t", "text": "x"}],
        }
    )
    pages = render.site_pages(
        env, {"plan": plan}, {"plan": "records/plans/plan.yaml"}, [Card.of(record)]
    )
    ticked = next(line for line in pages["plans/plan.md"].splitlines() if line.startswith("- [x]"))
    assert ticked.startswith(
        "- [x] Collect the data — [the model's own answers](../records/collect.md)"
    )


def test_the_home_page_counts_records_without_a_verdict_by_their_status() -> None:
    """A planned record and a step's (no verdict either) as their records make them, not as
    a cache reads them back: their status is the record's string."""
    from kbgen.kb.cards import Card
    from kbgen.kb.models import Record
    from tests.kb.test_models import STEP

    planned = Record.model_validate(
        {"schema_version": 1, "id": "p", "title": "t", "status": "planned", "created": "2026-12-01"}
    )
    cards = [Card.of(planned), Card.of(Record.model_validate(STEP))]
    text = f"# Home\n\n{render.HOME_START}\n{render.HOME_END}\n"
    page = render.home_page(render.environment(None), text, cards, [])
    assert page is not None and "2 records (1 planned, 1 concluded)" in page


def test_the_prefix_cache_is_on_the_page_arm_by_arm() -> None:
    from kbgen.kb.models import PrefixCache
    from tests.support.records import load_record

    record = load_record(REPO / "records" / "2026-12-01-ngram-vs-baseline-h200-c1-pinned.yaml")
    env = render.environment(None)
    assert "prefix cache" not in "\n".join(render.record_pages(env, record, "r.yaml", {}).values())
    record.prefix_cache = [
        PrefixCache(variant="baseline", queries=4096, hits=1024, hit_rate=0.25),
        PrefixCache(variant="ngram", queries=4096, hits=0, hit_rate=0.0),
    ]
    page = "\n".join(render.record_pages(env, record, "r.yaml", {}).values())
    assert "| baseline | – | 4,096 | 1,024 | 25% |" in page
    assert "| ngram | – | 4,096 | 0 | 0% |" in page
    record.prefix_cache[0] = record.prefix_cache[0].model_copy(update={"designed_hit_rate": 0.24})
    page = "\n".join(render.record_pages(env, record, "r.yaml", {}).values())
    assert "| Variant | Load | tokens looked up | tokens held | hit rate | by design |\n" in page
    assert "| baseline | – | 4,096 | 1,024 | 25% | 24% |\n" in page
    assert "| ngram | – | 4,096 | 0 | 0% | – |\n" in page
