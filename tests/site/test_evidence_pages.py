"""The evidence on the pages: a plan's ticked tasks carry their record's figures, decision and
consequences, with what the evidence rules out and what is still open; record pages list their
replications and flag contradictions and stale evidence; the index groups records by question.
The figures are read back from the pages and compared with the records' YAML."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbgen.kb.cards import MAX_LISTED
from kbgen.site import render
from tests.conftest import RECORD
from tests.site.conftest import Site
from tests.support import replicated, swept
from tests.support.committed import committed
from tests.support.figures import as_recorded, close, headline, index_rows, linked
from tests.support.golden import assert_golden, golden_path
from tests.support.hostile import to_html


def _example(tmp_path: Path) -> Path:
    return committed(tmp_path, "records") / "records"  # not what `make demo` adds


def _replicated(tmp_path: Path) -> Path:
    return replicated.knowledge_base(tmp_path / "replicated")


KNOWLEDGE_BASES = {"example": _example, "replicated": _replicated}


def _yaml(records: Path) -> dict[str, dict[str, Any]]:
    """Every record's YAML, as a plain reader of the file sees it, by id."""
    data = (yaml.safe_load(p.read_text()) for p in sorted(records.glob("*.yaml")))
    return {d["id"]: d for d in data}


def _text(markdown_text: str) -> str:
    """The visible text of Markdown, as the site shows it, on one line."""
    shown = html.unescape(re.sub(r"<[^>]+>", " ", to_html(markdown_text)))
    return " ".join(shown.split())


def test_golden_plan_page_and_index_of_the_example_records(tmp_path: Path, site: Site) -> None:
    """Regenerated from the repository's records."""
    content = site(_example(tmp_path))
    for name in ("plans/next-steps-eagle.md", "records/index.md"):
        assert_golden(content[name], golden_path(name, prefix="example__"))


@pytest.mark.parametrize("kb", KNOWLEDGE_BASES)
def test_the_plan_page_s_figures_are_the_records(tmp_path: Path, site: Site, kb: str) -> None:
    """Under each ticked task, the figures, decision and consequences of the record that
    resolves it; under "Ruled out", each refuted record's hypothesis and figures."""
    records = KNOWLEDGE_BASES[kb](tmp_path)
    data = _yaml(records)
    pages = site(records)
    plans = [p for p in pages if p.startswith("plans/") and p != "plans/index.md"]
    found = {name: _ticked_and_ruled_out(pages[name], data) for name in plans}
    kimi = "2026-11-29-ngram-spec-decode-kimi-k2-5"
    eagle3 = "2026-12-06-eagle3-k1-h100-pinned"  # the SmolLM2 plan's benchmark, decided
    # 2026-12-02-ngram-sweep-h200-pinned: inconclusive since its family is the whole record
    expected = {"example": [{kimi}, {eagle3}], "replicated": [{"elsewhere"}]}
    assert sorted(found.values(), key=sorted) == sorted(expected[kb], key=sorted)


def _ticked_and_ruled_out(text: str, data: dict[str, Any]) -> set[str]:
    """Check a plan page's ticked tasks and "Ruled out" against the records; the refuted
    records it names."""
    lines = text.splitlines()
    ticked = [i for i, line in enumerate(lines) if line.startswith("- [x] ")]
    assert ticked
    shown = set()
    for i in ticked:
        record = data[linked(lines[i])]
        if "step" in record:  # a step of work: done, nothing decided, no figures of a test
            assert lines[i].endswith("**concluded**") and not lines[i + 2].startswith("    `")
            continue
        # an inconclusive record whose classes decided says which did
        outcome = record["verdict"]["outcome"]
        assert re.search(rf"\*\*{outcome}\*\*( \([^)]*\))?$", lines[i]), lines[i]
        assert lines[i + 1] == "" and lines[i + 2].startswith("    `")
        as_recorded(lines[i + 2], record)
        shown.add(record["id"])
    page = _text(text)
    for rid in shown:
        for field in ("decision", "consequences"):
            if data[rid].get(field):
                assert _text(data[rid][field]) in page, field
    ruled_out = text.split("### Ruled out", 1)[1].split("### Still open", 1)[0]
    refuted = [line for line in ruled_out.splitlines() if line.startswith("    **Refuted** by ")]
    for line in refuted:
        record = data[linked(line)]
        assert record["verdict"]["outcome"] == "refuted"
        assert _text(record["hypothesis"]["statement"]) in _text(ruled_out)
        as_recorded(line.split(" — ", 1)[1], record)
    return {linked(line) for line in refuted}


def _supported(tmp_path: Path) -> Path:
    """The replicated knowledge base and a record supported on a model of its own: the
    supported record there (`contradiction`) is contradicted, this one is not."""
    records = _replicated(tmp_path)
    supported = "    coding: {outcome: supported, effect: 0.09, ci_low: 0.06, ci_high: 0.12}"
    text = replicated.record("supporting", "2026-11-12", effect=supported)
    text = text.replace("outcome: refuted", "outcome: supported")
    (records / "supporting.yaml").write_text(text.replace("{name: tiny}", "{name: third-model}"))
    return records


@pytest.mark.parametrize("kb", [*KNOWLEDGE_BASES, "supported"])
def test_the_plan_page_lists_what_the_evidence_supports(
    tmp_path: Path, site: Site, kb: str
) -> None:
    """Under "Supported", each uncontradicted record that supports its hypothesis, in all
    classes or in the ones named, with its figures."""
    records = {**KNOWLEDGE_BASES, "supported": _supported}[kb](tmp_path)
    data = _yaml(records)
    pages = site(records)
    plans = [p for p in pages if p.startswith("plans/") and p != "plans/index.md"]
    sections = [pages[n].split("### Supported\n", 1)[1].split("### Ruled out", 1)[0] for n in plans]
    lines = [
        line
        for section in sections
        for line in section.splitlines()
        if line.startswith("    **Supported**")
    ]
    for line in lines:
        verdict = data[linked(line)]["verdict"]
        classes = [c for c, v in verdict["per_class"].items() if v["outcome"] == "supported"]
        if verdict["outcome"] == "supported":
            assert line.startswith("    **Supported** by ")
        else:
            assert line.startswith(f"    **Supported** in {', '.join(sorted(classes))} by ")
        as_recorded(line.split(" — ", 1)[1], data[linked(line)])
    expected = {"example": set(), "replicated": set(), "supported": {"supporting"}}
    assert {linked(line) for line in lines} == expected[kb]
    for section in sections:
        if "    **Supported**" not in section:
            assert "Nothing yet: no supported record" in section


def test_the_example_plan_says_what_is_still_open(tmp_path: Path, site: Site) -> None:
    plan = site(_example(tmp_path))["plans/next-steps-eagle.md"]
    still_open = plan.split("### Still open\n\n", 1)[1].splitlines()
    tasks = yaml.safe_load((_example(tmp_path) / "plans" / "next-steps-eagle.yaml").read_text())
    resolved = {
        ref.split("#")[1]
        for d in _yaml(_example(tmp_path)).values()
        if d["status"] == "concluded"
        for ref in d.get("resolves") or []
        if ref.startswith("next-steps-eagle#")  # the SmolLM2 plan has tasks of the same ids
    }
    assert still_open == [f"- {t['text']}" for t in tasks["tasks"] if t["id"] not in resolved]


def _block(page: str, start: str) -> str:
    """The admonition of `page` that starts with `start`, up to its last indented line."""
    lines = page.split(start, 1)[1].splitlines()[1:]
    return "\n".join(line for line in lines[: next(i for i, s in enumerate(lines) if not s)])


def test_both_contradicting_records_flag_each_other(tmp_path: Path, site: Site) -> None:
    pages = site(_replicated(tmp_path))
    for pair in replicated.CONTRADICTIONS:
        for this, other in (pair, pair[::-1]):
            page = pages[f"records/{this}.md"]
            warning = _block(page, '!!! warning "Contradicted')
            assert page.index("!!! warning") < page.index("## Context")  # near the top
            assert re.search(rf"\]\({other}\.md\) \(\d{{4}}-\d\d-\d\d\), coding: ", warning)
            row = next(
                line
                for line in page.splitlines()
                if line.startswith("| ") and f"]({other}.md)" in line
            )
            assert "⚠️ contradicts this record in coding" in row
    # the two refuted records agree: a replication, no contradiction
    first = pages["records/first.md"]
    assert "(replication.md)" not in _block(first, '!!! warning "Contradicted')
    assert "!!! warning" not in pages["records/elsewhere.md"]


def test_a_replication_lists_the_others_with_their_outcomes(tmp_path: Path, site: Site) -> None:
    records = _replicated(tmp_path)
    data, pages = _yaml(records), site(records)
    question = {"first", "replication", "contradiction"}
    for rid in question:
        section = pages[f"records/{rid}.md"].split("## Replications\n", 1)[1].split("\n## ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| 20")]
        listed = [linked(row) for row in rows]
        others = sorted(question - {rid}, key=lambda r: str(data[r]["created"]), reverse=True)
        assert listed == others  # newest first
        for row, other in zip(rows, others, strict=True):
            cells = [c.strip() for c in row.strip("|").split(" | ")]
            record = data[other]
            assert cells[0] == str(record["concluded"])
            assert cells[2] == record["config"]["engine"]["version"]
            assert cells[3] == f"**{record['verdict']['outcome']}**"
            ((cls, v),) = record["verdict"]["per_class"].items()
            prefix = f"{cls}: {v['outcome']} "
            assert cells[4].startswith(prefix)
            _, [(_, effect, bounds)], _ = headline(f"{cls} {cells[4].removeprefix(prefix)}")
            assert bounds is not None
            assert close(effect, v["effect"]) and close(bounds[0], v["ci_low"])
            assert close(bounds[1], v["ci_high"])
    assert "## Replications" not in pages["records/elsewhere.md"]


def test_stale_records_are_marked(tmp_path: Path, site: Site) -> None:
    records = _replicated(tmp_path)
    data, pages = _yaml(records), site(records)
    newest = "contradiction"
    version = data[newest]["config"]["engine"]["version"]
    for rid in ("first", "replication"):
        note = _block(pages[f"records/{rid}.md"], '!!! note "Stale evidence"')
        mine = data[rid]["config"]["engine"]["version"]
        assert note == (
            f"    Measured on vllm {mine}; [{data[newest]['title']}]({newest}.md) measured the"
            f" same setup on vllm {version}."
        )
    for rid in ("contradiction", "elsewhere"):
        assert "Stale evidence" not in pages[f"records/{rid}.md"]
    rows = {
        linked(line): line
        for line in pages["records/index.md"].splitlines()
        if line.startswith("| 20")
    }
    assert [rid for rid, row in rows.items() if " · stale |" in row] == ["replication", "first"]
    contradicted = {rid for rid, row in rows.items() if "· ⚠️ contradicted" in row}
    assert contradicted == {rid for pair in replicated.CONTRADICTIONS for rid in pair}


def test_the_plan_page_flags_a_contradicted_task(tmp_path: Path, site: Site) -> None:
    plan = site(_replicated(tmp_path))["plans/next-steps.md"]
    task = plan.split("- [x] Test n-gram speculative decoding", 1)[1].split("\n- [", 1)[0]
    assert "](../records/contradiction.md): **supported**" in task
    for other in ("first", "replication"):
        assert re.search(
            rf"⚠️ \*\*Contradicted\*\* by \[[^]]+\]\(\.\./records/{other}\.md\) \([\d-]+\) in "
            r"coding: refuted vs supported\.",
            task,
        )
    still_open = plan.split("### Still open\n\n", 1)[1]
    assert still_open.startswith("- Test n-gram speculative decoding — [n-gram vs baseline]")
    assert "⚠️ contradicted by" in still_open.splitlines()[0]


def test_the_plan_page_flags_a_task_resolved_by_stale_evidence(tmp_path: Path, site: Site) -> None:
    """When the newest record of the question does not resolve the task, the task's record is
    stale: the plan page says so, with the versions."""
    records = _replicated(tmp_path)
    newest = records / "contradiction.yaml"
    newest.write_text(newest.read_text().replace("resolves:\n  - next-steps#test-ngram\n", ""))
    data = _yaml(records)
    old, new = (data[r]["config"]["engine"]["version"] for r in ("replication", "contradiction"))
    link = f"[{data['contradiction']['title']}](../records/contradiction.md)"
    plan = site(records)["plans/next-steps.md"]
    task = plan.split("- [x] Test n-gram speculative decoding", 1)[1].split("\n- [", 1)[0]
    assert "](../records/replication.md): **refuted**" in task
    assert (
        f"⚠️ **Stale:** measured on engine version {old}; {link} measured the same setup on {new}."
        in task
    )
    line = plan.split("### Still open\n\n", 1)[1].splitlines()[0]
    assert f"stale: measured on {old}, {link} on {new}" in line


def test_a_superseded_replication_is_marked_and_many_are_counted(
    tmp_path: Path, site: Site
) -> None:
    records = _replicated(tmp_path)
    newer = records / "replication.yaml"
    newer.write_text(newer.read_text() + "supersedes: [first]\n")
    for i in range(MAX_LISTED):
        rid = f"copy-{i:02d}"
        (records / f"{rid}.yaml").write_text(replicated.record(rid, "2026-10-01"))
    pages = site(records)
    page = pages["records/contradiction.md"]
    listed = [
        line for line in page.split("## Replications", 1)[1].splitlines() if line.startswith("| 20")
    ]
    assert len(listed) == MAX_LISTED
    row = next(line for line in listed if "](first.md)" in line)
    assert "](first.md) (superseded)" in row and "contradicts" not in row  # settled
    others = len(list(records.glob("*.yaml"))) - 2  # itself and elsewhere
    assert f"And {others - MAX_LISTED} more: see the [records index](index.md)." in page


def test_a_task_lists_at_most_max_listed_other_records_and_counts_the_rest(
    tmp_path: Path, site: Site
) -> None:
    # every record of `replicated` resolves next-steps#test-ngram: with MAX_LISTED copies more,
    # the task's page lists the newest beside the one that ticks it and counts the rest
    records = _replicated(tmp_path)
    for i in range(MAX_LISTED):
        rid = f"copy-{i:02d}"
        (records / f"{rid}.yaml").write_text(replicated.record(rid, "2026-10-01"))
    plan = site(records)["plans/next-steps.md"]
    task = plan.split("\n- [x] ", 1)[1].split("\n- [", 1)[0]
    listed = [line for line in task.splitlines() if line.startswith("    - [")]
    assert len(listed) == MAX_LISTED
    resolving = len(list(records.glob("*.yaml")))  # every record, the one that ticks it too
    more = resolving - 1 - MAX_LISTED
    assert (
        more > 0
        and task.splitlines().count(
            f"    - And {more} more: see the [records index](../records/index.md)."
        )
        == 1
    )


def test_the_index_is_one_table_newest_first_with_each_record_s_question(
    tmp_path: Path, site: Site
) -> None:
    records = _replicated(tmp_path)
    (records / "unasked.yaml").write_text(
        "schema_version: 1\nid: unasked\ntitle: Later\nstatus: planned\ncreated: 2026-12-01\n"
    )
    data, index = _yaml(records), site(records)["records/index.md"]
    assert index.count("\n| Date | Record |") == 1 and "\n## " not in index.split("## Plans")[0]
    rows = index_rows(index)
    assert sorted(linked(row["Record"]) for row in rows) == sorted(data)
    shown = [(row["Date"], linked(row["Record"])) for row in rows]
    assert shown == sorted(shown, reverse=True)  # newest first, by the date shown
    for row in rows:
        record = data[linked(row["Record"])]
        assert row["Date"] == str(record.get("concluded") or record["created"])
    by_id = {linked(row["Record"]): row for row in rows}
    assert by_id["unasked"]["Question"] == "–" and by_id["unasked"]["Verdict"] == "planned"
    asked = {rid: row["Question"] for rid, row in by_id.items() if rid != "unasked"}
    assert asked["first"] == asked["replication"] == asked["contradiction"]
    assert asked["first"] == "ngram vs baseline · tiny · test cpu · vllm"
    assert asked["elsewhere"] != asked["first"]
    config = data["first"]["config"]
    assert by_id["first"]["Model"] == config["model"]["name"]
    assert by_id["first"]["Hardware"] == config["hardware"]["cpu"]
    assert by_id["first"]["Variant"] == f"{data['first']['verdict']['variant']} vs baseline"


@pytest.mark.parametrize(
    ("effect", "bounds", "shown"),
    [
        (-0.26, (-0.3, -0.2), "-26.0% [-30.0% … -20.0%]"),
        (0.09, None, "+9.0%"),
        (0.0, (-0.01, 0.011), "+0.0% [-1.0% … +1.1%]"),
    ],
)
def test_interval(effect: float, bounds: Any, shown: str) -> None:
    assert render.interval(effect, bounds) == shown


@pytest.mark.parametrize(
    ("bounds", "shown"),
    [
        ((0.17, 0.31), "17–31%"),
        ((0.362301, 0.362301), "36%"),
        ((0.361, 0.364), "36%"),
        (None, "–"),
        ((0.00149, 0.00149), "0.1%"),  # EAGLE-3's fifth position on the H200: not 0%
        ((0.0, 0.0), "0%"),
        ((0.00672, 0.00672), "1%"),
    ],
)
def test_acceptance(bounds: Any, shown: str) -> None:
    assert render.acceptance(bounds) == shown


def test_markdown_inside_a_list_item_keeps_its_links_working(tmp_path: Path) -> None:
    """A record's Markdown on a plan page: its lines indented into the item, its relative links
    rebased from records/ (absolute ones and anchors as they were), unsafe ones still gone."""
    text = (
        "See [a](other.md#x), [b](../plans/p.md), [c](https://example.org/a), [d](#top)"
        " and [e](javascript:alert(1)).\n\nSecond paragraph."
    )
    page = render.markdown(text, indent=4, base="../records/")
    assert page == (
        "See [a](../records/other.md#x), [b](../plans/p.md), [c](https://example.org/a),"
        " [d](#top) and e.\n\n    Second paragraph."
    )
    hostile = render.markdown("[a](alert(1).md)", base="javascript:")
    assert "javascript" not in hostile and hostile == "a"


def test_headline_without_numbers_is_empty() -> None:
    from kbgen.kb.cards import Card
    from kbgen.kb.models import Record

    card = Card.of(Record.model_validate(yaml.safe_load(RECORD)))
    assert render.headline(card) == "`decode_tok_s`: coding -26.0% [-30.0% … -20.0%]"
    bare = Card(**{**card.__dict__, "results": (), "acceptance": None})
    assert render.headline(bare) == ""


def test_a_superseded_record_s_page_names_what_superseded_it(tmp_path: Path, site: Site) -> None:
    pages = site(_example(tmp_path))
    old = pages["records/2026-11-29-ngram-vs-baseline.md"]
    note = _block(old, '!!! note "Superseded"')
    assert "](2026-12-01-ngram-vs-baseline.md) (2026-12-01): read that first." in note
    assert old.index('!!! note "Superseded"') < old.index("## Context")  # near the top
    # its title in lists (the tags page) says so: the record that replaced it has the same one
    title = "n-gram speculative decoding vs baseline on SmolLM2-135M (vLLM, CPU)"
    assert f'title: "{title} (superseded)"\n' in old
    new = pages["records/2026-12-01-ngram-vs-baseline.md"]
    assert f'title: "{title}"\n' in new and "Superseded" not in new
    assert "× 1 round |" in old and not [p for p, md in pages.items() if " 1 rounds" in md]


def test_a_minimum_effect_below_one_percent_is_not_rounded_to_nothing(
    tmp_path: Path, site: Site
) -> None:
    records = _replicated(tmp_path)
    first = records / "first.yaml"
    first.write_text(first.read_text().replace("minimum_effect: 0.05", "minimum_effect: 0.005"))
    page = site(records)["records/first.md"]
    assert "which must increase by at least 0.5% (" in page
    assert "must **increase** by at least 0.5%." in page
    assert "by at least 5% (" in site(_replicated(tmp_path / "again"))["records/first.md"]


# --- sweeps ----------------------------------------------------------------------------------


def _swept(tmp_path: Path) -> Path:
    return swept.knowledge_base(tmp_path / "swept")


def test_golden_plan_page_and_index_of_a_sweep(tmp_path: Path, site: Site) -> None:
    content = site(_swept(tmp_path))
    for name in ("plans/next-steps.md", "records/index.md"):
        assert_golden(content[name], golden_path(name, prefix="swept__"))


def _load(load: dict[str, int]) -> str:
    return ", ".join(f"{name} {value}" for name, value in sorted(load.items()))


def test_a_task_resolved_by_a_sweep_shows_its_best_and_what_it_ruled_out(
    tmp_path: Path, site: Site
) -> None:
    """Read back from the page and compared with the sweep's YAML: at each load its best
    configuration and probability, and every refuted cell with its classes."""
    records = _swept(tmp_path)
    verdict = _yaml(records)["sweep"]["verdict"]
    lines = site(records)["plans/next-steps.md"].splitlines()
    best = next(line for line in lines if line.startswith("    **Best configuration:** "))
    shown = best.removeprefix("    **Best configuration:** ").removesuffix(".").split("; at ")
    assert [s.removeprefix("at ") for s in shown] == [
        f"{_load(b['load'])}, {b['variant']} (probability {b['probability_best']:.2f}"
        + (f"; {', '.join(b['ties'])} as good)" if b.get("ties") else ")")
        for b in verdict["best"]
    ]
    ruled = next(line for line in lines if line.startswith("    **Ruled out:** "))
    refuted: dict[str, list[str]] = {}
    for cell in verdict["cells"]:
        if cell["outcome"] == "refuted":
            refuted.setdefault(f"{cell['variant']} at {_load(cell['load'])}", []).append(
                cell["class"]
            )
    assert ruled.removeprefix("    **Ruled out:** ").removesuffix(".") == "; ".join(
        f"{where} ({', '.join(classes)})" for where, classes in refuted.items()
    )


def test_an_a_b_task_shows_no_best_or_cells(tmp_path: Path, site: Site) -> None:
    page = site(_replicated(tmp_path))["plans/next-steps.md"]
    assert "**Best configuration:**" not in page and "**Ruled out:**" not in page


def test_a_sweep_s_cell_and_the_a_b_record_of_its_question_flag_each_other(
    tmp_path: Path, site: Site
) -> None:
    pages = site(_swept(tmp_path))
    sweep, a_b = pages["records/sweep.md"], pages["records/ab-k3-c8.md"]
    assert "](ab-k3-c8.md) (2026-11-05), k3 at concurrency 8, coding: supported vs refuted" in (
        _block(sweep, '!!! warning "Contradicted')
    )
    assert "](sweep.md) (2026-11-10, k3 at concurrency 8), coding: supported vs refuted" in (
        _block(a_b, '!!! warning "Contradicted')
    )
    rows = {linked(line): line for line in sweep.splitlines() if line.startswith("| 2026-")}
    assert rows.keys() == {"ab-k3-c8", "ab-k5-c1"}  # ab-elsewhere ran a load the sweep did not
    assert (
        "— as this sweep's k3 at concurrency 8 ⚠️ contradicts this record in coding"
        in (rows["ab-k3-c8"])
    )
    assert "— as this sweep's k5 at concurrency 1 |" in rows["ab-k5-c1"]  # a replication
    [row] = [line for line in a_b.splitlines() if line.startswith("| 2026-")]
    assert "](sweep.md) (k3 at concurrency 8) ⚠️ contradicts this record in coding" in row
    plan = pages["plans/next-steps.md"]
    assert (
        "⚠️ **Contradicted** (k3 at concurrency 8) by [A/B ab-k3-c8](../records/ab-k3-c8.md) "
        "(2026-11-05) in coding: supported vs refuted." in plan
    )


def test_the_index_shows_a_sweep_s_best_configuration(tmp_path: Path, site: Site) -> None:
    rows = {linked(r["Record"]): r for r in index_rows(site(_swept(tmp_path))["records/index.md"])}
    assert rows["sweep"]["Variant"] == "k3 vs baseline · best: k3 @c1 (0.97), baseline @c8 (0.61)"
    assert rows["ab-k3-c8"]["Variant"] == "ngram vs baseline"


@pytest.mark.parametrize("name", ["k_3", "ngram_gpu-k3", "k__3_x"])
def test_a_sweep_s_variant_names_are_text_on_the_pages(
    tmp_path: Path, site: Site, name: str
) -> None:
    """A variant's name may hold underscores, which Markdown reads as emphasis: the plan page
    and the index show them as written."""
    records = _swept(tmp_path)
    path = records / "sweep.yaml"
    data = yaml.safe_load(path.read_text())
    variants = data["config"]["variants"]
    variants[name] = variants.pop("k3")
    data["verdict"]["variant"] = name
    for item in [*data["verdict"]["cells"], *data["verdict"]["best"]]:
        item["variant"] = name if item["variant"] == "k3" else item["variant"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    pages = site(records)
    plan = _text(pages["plans/next-steps.md"])
    assert f"at concurrency 1, {name} (probability 0.97)" in plan
    assert (
        f"Ruled out: k5 at concurrency 1 (coding); {name} at concurrency 8 (coding, math)" in plan
    )
    assert f"best: {name} @c1 (0.97)" in _text(pages["records/index.md"])


def _sweep_card(**best: Any) -> Any:
    from kbgen.kb.cards import Card
    from kbgen.kb.models import Record

    data = swept.sweep()
    if best:
        data["verdict"]["best"] = [best]
    return Card.of(Record.model_validate(data))


@pytest.mark.parametrize(
    ("best", "compact", "words"),
    [
        (
            {},
            "best: k3 @c1 (0.97), baseline @c8 (0.61)",
            "at concurrency 1, k3 (probability 0.97); at concurrency 8, baseline (probability "
            "0.61; k5 as good)",
        ),
        (
            {
                "load": {"concurrency": 8, "max_tokens": 256},
                "variant": "k5",
                "probability_best": 0.5,
            },
            "best: k5 @c8/256tok (0.50)",
            "at concurrency 8, max_tokens 256, k5 (probability 0.50)",
        ),
        (  # a sweep of settings at one load
            {"variant": "k3", "probability_best": 0.999, "ties": ["k5", "baseline"]},
            "best: k3 (1.00)",
            "k3 (probability 1.00; k5, baseline as good)",
        ),
    ],
)
def test_a_sweep_s_best_configuration_in_words(best: Any, compact: str, words: str) -> None:
    from kbgen.site import index

    card = _sweep_card(**best)
    assert (index.best(card), render.best_configuration(card)) == (compact, words)


def test_an_a_b_record_has_no_best_configuration_or_cells_to_show() -> None:
    from kbgen.kb.cards import Card
    from kbgen.kb.models import Record
    from kbgen.site import index

    card = Card.of(Record.model_validate(yaml.safe_load(RECORD)))
    assert (index.best(card), render.best_configuration(card), render.ruled_out(card)) == ("",) * 3
    assert render.acceptance_by_position(card) == ""  # one drafting arm: its headline says it


def test_a_task_resolved_by_a_sweep_of_drafts_shows_each_arm_s_acceptance_by_position(
    tmp_path: Path, site: Site
) -> None:
    """The SmolLM2 plan's benchmark: ticked by the deciding record (EAGLE-3 at 1 token beside
    n-gram at 2), and listed under it among the other records that resolve it, the H200 sweep
    (EAGLE-3 at 1, 2, 3 and 5 tokens beside n-gram): for each, each drafting arm's acceptance at
    every draft position, read back from the page and compared with the record's `spec_decode`."""
    records = _example(tmp_path)
    page = site(records)["plans/next-steps-smollm2-h200.md"]
    task = page[page.index("- [x] Benchmark the EAGLE-3 draft") :].split("\n- [", 1)[0]
    ticking = next(li for li in task.splitlines() if "**Acceptance by draft position:**" in li)
    sweep = "2026-12-04-eagle3-sweep-h200-pinned"
    other = next(li for li in task.splitlines() if li.startswith("    - [") and sweep in li)
    assert task.index("**Other records that resolve it**") < task.index(other)
    decider = "2026-12-06-eagle3-k1-h100-pinned"
    arms = _acceptance_as_recorded(ticking.split(":** ", 1)[1], decider, records)
    assert arms == {"ngram": ["60%", "42%"], "eagle3": ["36%"]}
    arms = _acceptance_as_recorded(
        other.split("acceptance by draft position: ", 1)[1].split("; ⚠️", 1)[0], sweep, records
    )
    assert arms["eagle3-k5"] == ["33%", "13%", "6%", "1%", "0.1%"]
    assert arms["ngram"] == ["60%", "42%"]


def _acceptance_as_recorded(said: str, record_id: str, records: Path) -> dict[str, list[str]]:
    """Each drafting arm's acceptance by position as a page says it (`ngram 60% · 42%; eagle3
    36%`), checked against the record's `spec_decode`."""
    spec_decode = _yaml(records)[record_id]["spec_decode"]
    shown = said.removesuffix(".").split("; ")
    arms = {arm: rates.split(" · ") for arm, rates in (s.split(" ", 1) for s in shown)}
    assert list(arms) == list(spec_decode)
    for arm, rates in arms.items():
        expected = spec_decode[arm]["per_position_acceptance"]
        assert [float(r.removesuffix("%")) / 100 for r in rates] == pytest.approx(
            expected, abs=0.005
        )
    return arms


def test_a_ticked_task_lists_the_other_standing_records_that_resolve_it(
    tmp_path: Path, site: Site
) -> None:
    """Under a ticked task, every other concluded record that resolves it, newest first, and no
    superseded one: the SmolLM2 plan's collection was done on an H200 (2026-12-04, superseding
    2026-12-03's) and again on the H100 that served the deciding draft (2026-12-06)."""
    records = _example(tmp_path)
    page = site(records)["plans/next-steps-smollm2-h200.md"]
    tasks = page.split("\n- [")[1:]
    collect = next(t for t in tasks if t.startswith("x] Collect training data"))
    assert linked(collect) == "2026-12-06-eagle3-collect-smollm2-h100"
    others = [li for li in collect.splitlines() if li.startswith("    - [")]
    assert [linked(li) for li in others] == ["2026-12-04-eagle3-collect-smollm2-h200"]
    assert others[0].endswith("(2026-12-04): **concluded**")
    benchmark = next(t for t in tasks if t.startswith("x] Benchmark the EAGLE-3 draft"))
    listed = [linked(li) for li in benchmark.splitlines() if li.startswith("    - [")]
    assert listed == ["2026-12-04-eagle3-sweep-h200-pinned", "2026-12-04-eagle3-k1-h200-pinned"]
    # the two H200 records contradict each other: each says so where it is listed
    assert all(
        "⚠️ contradicted (eagle3" in li for li in benchmark.splitlines() if li.startswith("    - [")
    )
    test_ngram = next(t for t in tasks if t.startswith("x] Test n-gram"))
    assert "Other records that resolve it" not in test_ngram  # one record resolves it
    # in the site, a list inside the task's item (the last), after the ticking record's figures
    built = to_html(page)
    task_html = built[built.index("Benchmark the EAGLE-3 draft") :]
    item = task_html[: task_html.index("</ul>\n</li>\n</ul>")]
    assert (
        item.index("Ruled out") < item.index("Other records that resolve it") < item.index("<ul>")
    )
    assert re.findall(r'<li><a href="\.\./records/([^"]+)\.md"', item) == listed
