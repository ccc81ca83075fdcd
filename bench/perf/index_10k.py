"""Time the records index over 10,000 records: its render, its size, and MkDocs' part of it.

Usage: python bench/perf/index_10k.py [N] [--quick]

The cards are those of the example's records (records/*.yaml), each copied N / 7 times over
two years of dates, with a realistic mix of questions: every copy's output length (8 values)
and concurrency (3) asked in turn, so 168 questions of about 60 records each, many of one
label (told apart by `max_tokens`). Prints the time of the replication rules over the cards
(`kb.replications.evidence`, once per render), of the index page's render from the cards
(`render.site_pages`' one pass: no record parsed), the page's size in Markdown and in HTML
(the table as Python-Markdown makes it, which MkDocs then puts in its theme), and that
conversion's time. `--quick`: 200 records, for the test that keeps this script working.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import sys
import time
from pathlib import Path

import markdown

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from kbgen.kb import documents, replications  # noqa: E402
from kbgen.kb.cards import Card  # noqa: E402
from kbgen.kb.models import Record  # noqa: E402
from kbgen.site import render  # noqa: E402

MAX_TOKENS = [64 * (1 + i) for i in range(8)]
CONCURRENCY = [1, 8, 32]


def cards(n: int) -> list[Card]:
    """`n` cards of copies of the example's records, questions mixed as the docstring says."""
    loaded = [documents.load_model(p, Record) for p in sorted((REPO / "records").glob("*.yaml"))]
    examples = [r for r in loaded if r.step is None]  # the tests: a step of work asks no question
    asked: dict[tuple[int, int, int], Card] = {}  # one card per question, copied
    out = []
    for i in range(n):
        which = (i % len(examples), i // 7 % len(MAX_TOKENS), i // 56 % len(CONCURRENCY))
        if which not in asked:
            record = examples[which[0]]
            data = record.model_dump(mode="json", exclude_none=True)
            data["workload"] = (data.get("workload") or {"prompt_suite": "s"}) | {
                "max_tokens": MAX_TOKENS[which[1]],
                "concurrency": CONCURRENCY[which[2]],
            }
            asked[which] = Card.of(Record.model_validate(data))
        base = asked[which]
        day = dt.date(2025, 1, 1) + dt.timedelta(days=i * 730 // n)
        out.append(
            dataclasses.replace(
                base,
                id=f"{base.id}-{i:05d}",
                title=f"{base.title}, copy {i}",
                created=day,
                concluded=day if base.concluded else None,
            )
        )
    return out


def main() -> dict[str, float]:
    args = [a for a in sys.argv[1:] if a != "--quick"]
    n = 200 if "--quick" in sys.argv else int(args[0]) if args else 10_000
    made = cards(n)
    start = time.perf_counter()
    found = replications.evidence(made)
    evidence_s = time.perf_counter() - start
    env = render.environment(None)
    start = time.perf_counter()
    pages = render.site_pages(env, {}, {}, made, found)
    index_s = time.perf_counter() - start
    page = pages[f"{render.RECORDS_DIR}/index.md"]
    start = time.perf_counter()
    html = markdown.markdown(page, extensions=["tables", "toc", "admonition", "attr_list"])
    html_s = time.perf_counter() - start
    figures = {
        "records": n,
        "questions": len(found.questions),
        "evidence_s": evidence_s,
        "index_s": index_s,
        "markdown_mb": len(page.encode()) / 1e6,
        "html_mb": len(html.encode()) / 1e6,
        "html_gzip_mb": len(gzip.compress(html.encode())) / 1e6,
        "html_s": html_s,
    }
    print(f"{n} records, {figures['questions']} questions")
    print(f"replication rules over the cards (evidence): {evidence_s:.2f} s")
    print(f"records index rendered from the cards: {index_s:.2f} s")
    print(
        f"page: {figures['markdown_mb']:.1f} MB of Markdown, {figures['html_mb']:.1f} MB of HTML"
        f" ({figures['html_gzip_mb']:.2f} MB gzipped), made in {html_s:.1f} s by Python-Markdown"
    )
    return figures


if __name__ == "__main__":
    main()
