"""`kbgen render` end to end, and the one place that writes docs/: skip, load, render, write.

A snapshot makes a no-op stat-only, a file cache re-renders only what a change touches, and each
file is parsed once. See docs/design.md, "Rendering".
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbgen import __version__
from kbgen.errors import InvalidInput, KbgenError
from kbgen.kb import files
from kbgen.kb.files import Fingerprint, fingerprint, iter_yaml_files, read_json

if TYPE_CHECKING:
    from kbgen.kb.cards import Card
    from kbgen.kb.loading import Facts, KnowledgeBase, Known
    from kbgen.kb.models import Plan, Record
    from kbgen.kb.replications import Evidence, Related
    from kbgen.site.render import Here

CACHE = Path(".kbgen_cache") / "render.json"  # the snapshot; the file cache sits beside it
FILE_CACHE = "render-records.json"
COMPILED = "templates"  # the templates compiled, beside them
MAX_HOME_BYTES = 1 << 20  # docs/index.md, written by hand: larger is not a home page
FILE_CACHE_FORMAT = 8  # of `_entry`: bump it when that changes, so older caches are ignored
# the folders of generated pages: their mtime changes when a page is added or removed there
GENERATED = ("records", "plans")


@dataclass(frozen=True)
class Job:
    """What rendering a record's pages needs besides the record, in whichever process parsed it."""

    docs: Path
    records: Path  # the knowledge base's folder, as given
    templates: Path | None
    tasks: dict[str, list[str]]  # task texts by `plan#task`
    check: bool  # compare only, write nothing
    related: Mapping[str, Related] = dataclasses.field(default_factory=dict)  # by record id
    # False in the first pass, before every card is in: the pages of a record that answers a
    # question (it may have replications) are held, not written, until they are known
    replications_known: bool = True
    # kbgen's record template, whose parts that show other records are sections (`render.fill`):
    # filled in once every card is in, each file parsed once; a user's `record.md.j2` may show
    # them anywhere, so its pages are rendered again where they are out of date
    sections: bool = True
    compiled: Path | None = None  # where compiled templates are kept (`render.environment`)


@dataclass(frozen=True)
class RecordPages:
    """A record once its pages are rendered: what plan pages and indexes need of it."""

    card: Card
    pages: dict[str, Fingerprint | None]  # on disk after the render; None: not to be trusted
    related: str  # the key of what its page shows of its replications (`Related.key`)
    stale: tuple[str, ...] = ()  # the pages that differed from disk (written, unless checking)
    held: dict[str, str] | None = None  # rendered, not written yet: `pages` is empty then
    here: Here | None = None  # with `held`: its sections are still to fill (`render.fill`)


def render_site(
    records: Path,
    docs: Path,
    templates: Path | None = None,
    check: bool = False,
    cache: Path | None = CACHE,
) -> list[str]:
    """Render the knowledge base under `records` into `docs`; with `check`, only compare.

    Returns the pages written or removed (with `check`: those that are stale), relative to docs.
    `cache` is the snapshot's file (None: no caches).
    """
    inputs = {path: fingerprint(path) for path in iter_yaml_files([records])}
    code = code_key(templates)
    # whether the home page (`render.HOME`) is there: one made since may hold a block to fill
    key = _inputs_key(inputs, code) + str(docs.absolute()) + str(os.path.lexists(docs / "index.md"))
    last = _last_render(cache)
    if last.get("key") == key and _on_disk(docs, last.get("outputs", {})):
        return []

    from kbgen.kb import documents, replications
    from kbgen.kb import loading as kb
    from kbgen.kb.models import Plan
    from kbgen.site import render

    # record pages need the plans' task texts: read those few files first
    plans: list[Plan] = []
    for path in inputs:
        if documents.kind_of(path) is Plan:
            try:
                plans.append(documents.load_model(path, Plan))
            except InvalidInput:
                continue  # reported by the full load below
    compiled = None if cache is None else cache.with_name(COMPILED)
    job = Job(docs, records, templates, render.task_texts(plans), check, compiled=compiled)
    where = [str(docs.absolute()), str(records.absolute())]
    rules = json.dumps([FILE_CACHE_FORMAT, code, *where, job.tasks], sort_keys=True)
    remembered = None
    if cache is not None:
        remembered = files.FingerprintCache(
            cache.with_name(FILE_CACHE), hashlib.sha256(rules.encode()).hexdigest()
        )
    known = {} if remembered is None else _trusted(remembered, inputs, docs)
    # a record's page lists its replications: one that may have some is held until every card
    # is in, then written, or rendered again (as is a trusted one) if they are not what it
    # was rendered with
    own = templates is None or not (templates / "record.md.j2").exists()
    first = dataclasses.replace(job, replications_known=False, sections=own)
    listed = list(inputs)
    base = kb.scan([records], functools.partial(render_file, first), known=known, listed=listed)
    found = replications.evidence(_cards(base.products.values())) if not base.problems else None
    if found is not None:
        base = _with_replications(base, job, found, known, listed)
        env = render.environment(templates, compiled)
        held = [(path, p) for path, p in base.products.items() if getattr(p, "held", None)]
        for path, product in held:
            made, related_key = product.held or {}, product.related
            if product.here is not None:
                related = found.related(product.card.id)
                made, related_key = render.fill(env, made, related, product.here), related.key
            base.products[path] = _synced(job, product.card, related_key, made)
    if remembered is not None:
        for path, facts in base.facts.items():
            if path not in known and path in inputs:
                remembered.put(path, inputs[path], _entry(facts, base.products[path]))
        remembered.save()
    if base.problems:
        raise InvalidInput(base.problems)

    cards, produced, stale = [], [], []
    plan_models, sources = {}, {}
    for path, product in base.products.items():
        if isinstance(product, Plan):
            plan_models[product.id] = product
            sources[product.id] = render.source_of(path, records)
            continue
        cards.append(product.card)
        produced += product.pages
        stale += product.stale
    home = _home_text(docs / render.HOME)
    env = render.environment(templates, compiled)
    site = render.site_pages(env, plan_models, sources, cards, found, home)
    produced += site
    changed = stale + _sync(docs, site, check)
    leftovers = _leftovers(docs, set(produced))
    if check:
        return sorted(changed) + leftovers
    for rel in leftovers:
        (docs / rel).unlink()
    if cache is not None:
        folders = [rel for rel in GENERATED if (docs / rel).is_dir()]
        index = [render.HOME] if (docs / render.HOME).exists() else []  # a block may come
        outputs = {rel: fingerprint(docs / rel) for rel in [*sorted(produced), *folders, *index]}
        files.write_atomic(cache, json.dumps({"key": key, "outputs": outputs}).encode())
    return changed + leftovers


def _home_text(path: Path) -> str | None:
    """The home page's text, where it is a regular UTF-8 file (else it is left alone: a
    symlink too, which a write would replace)."""
    if path.is_symlink():
        return None
    try:
        return files.read_regular(path, MAX_HOME_BYTES).decode("utf-8")
    except (KbgenError, UnicodeDecodeError):
        return None


def _cards(products: Iterable[Any]) -> list[Card]:
    """The records' cards among scan products."""
    return [product.card for product in products if isinstance(product, RecordPages)]


def _with_replications(
    base: KnowledgeBase, job: Job, found: Evidence, known: dict[Path, Known], listed: list[Path]
) -> KnowledgeBase:
    """`base` with every record page whose replications differ from what it was rendered with
    rendered again (and, when it was trusted from the cache, forgotten there)."""
    from kbgen.kb import loading as kb
    from kbgen.kb.loading import Known

    redo = {
        path: related
        for path, product in base.products.items()
        if isinstance(product, RecordPages)
        and product.here is None  # its sections are filled in by `render_site`
        and product.related != (related := found.related(product.card.id)).key
    }
    if not redo:
        return base
    for path in redo:
        known.pop(path, None)  # no longer what the cache says: its entry is written again
    keep = {
        path: Known(base.facts[path], product)
        for path, product in base.products.items()
        if path not in redo and path in base.facts
    }
    again = dataclasses.replace(job, related={path.stem: r for path, r in redo.items()})
    return kb.scan([job.records], functools.partial(render_file, again), known=keep, listed=listed)


def render_file(job: Job, doc: Record | Plan, path: Path) -> Plan | RecordPages:
    """For `kb.scan`: a record's pages rendered and synced (`_sync`) where it was parsed.

    A plan comes back as is: its page needs every record's card. A page is complete or absent,
    never torn, so a load that fails on another file leaves only up-to-date pages behind; the
    indexes are not touched until every file is valid.
    """
    from kbgen.kb.cards import Card
    from kbgen.kb.models import Plan
    from kbgen.kb.replications import NOTHING
    from kbgen.site import render

    if isinstance(doc, Plan):
        return doc
    card = Card.of(doc)
    source = render.source_of(path, job.records)
    related = job.related.get(doc.id, NOTHING)
    env = render.environment(job.templates, job.compiled)
    if not job.replications_known and card.question is not None:  # written by `render_site`
        if job.sections:  # its sections filled in there: parsed once
            made = render.record_pages(env, doc, source, job.tasks, None)
            return RecordPages(card, {}, "", held=made, here=render.sections_of(doc))
        made = render.record_pages(env, doc, source, job.tasks, related)
        return RecordPages(card, {}, related.key, held=made)
    made = render.record_pages(env, doc, source, job.tasks, related)
    return _synced(job, card, related.key, made)


def _synced(job: Job, card: Card, related: str, made: dict[str, str]) -> RecordPages:
    """A record's rendered pages synced (`_sync`) under `job.docs`."""
    stale = _sync(job.docs, made, job.check)
    pages = {rel: _fingerprint(job.docs / rel) for rel in made}
    if job.check:  # a stale page is not what it should be: never trust its fingerprint
        pages.update(dict.fromkeys(stale))
    return RecordPages(card, pages, related, tuple(stale))


def _sync(docs: Path, pages: Mapping[str, str], check: bool) -> list[str]:
    """The pages whose file under `docs` differs from their text, each written unless `check`.

    Written atomically but not fsynced: pages are regenerated anyway, and fsync would cost most
    of the time.
    """
    if check:
        return [rel for rel, text in pages.items() if not files.holds(docs / rel, text.encode())]
    return [
        rel
        for rel, text in pages.items()
        if files.write_if_changed(docs / rel, text.encode(), durable=False)
    ]


def _leftovers(docs: Path, produced: set[str]) -> list[str]:
    """Generated pages on disk that the knowledge base no longer produces, and the temporary
    files of a render that was killed mid-write, relative to docs."""
    found = []
    for folder in GENERATED:
        try:
            names = sorted(os.listdir(docs / folder))  # names, not paths: 10,000 pages or more
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            relative = f"{folder}/{name}"
            if relative in produced:
                continue
            path = docs / relative
            if _is_generated(path) or files.abandoned(path):
                found.append(relative)
    return found


def foreign_pages(docs: Path) -> list[str]:
    """The files under `docs` where kbgen writes its pages that kbgen did not write (a user's
    own `docs/records/index.md`), relative to docs: a render would replace them."""
    from kbgen.site import index, verdict_box

    assets = {index.SCRIPT: index.script, verdict_box.STYLESHEET: verdict_box.stylesheet}
    found = []
    for folder in GENERATED:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for name in sorted(os.listdir(docs / folder)):
                path = docs / folder / name
                if path.is_dir() and not path.is_symlink():
                    continue
                asset = name in assets and path.is_file() and not path.is_symlink()
                if not _is_generated(path) and not (
                    asset and path.read_bytes() == assets[name]().encode()
                ):
                    found.append(f"{folder}/{name}")
    return found


def _is_generated(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():  # kbgen writes regular files; a FIFO would hang
        return False
    if path.suffix == ".svg":
        return b"kbgen-chart" in path.read_bytes()[:200]
    return path.suffix == ".md" and b"generated by kbgen render" in path.read_bytes()[:300]


def _entry(facts: Facts, product: Plan | RecordPages) -> dict[str, Any]:
    """What the file cache keeps of one file (`_trusted` reads it back)."""
    if isinstance(product, RecordPages):
        return {
            "facts": facts.to_json(),
            "card": product.card.to_json(),
            "digest": product.card.digest,
            "pages": product.pages,
            "related": product.related,
        }
    return {"facts": facts.to_json(), "plan": product.model_dump(mode="json")}


def _trusted(
    remembered: files.FingerprintCache, inputs: dict[Path, Fingerprint], docs: Path
) -> dict[Path, Known]:
    """The files whose cached entry holds: the file, and a record's pages, unchanged since."""
    from kbgen.kb.cards import Card
    from kbgen.kb.loading import Facts, Known
    from kbgen.kb.models import Plan

    known = {}
    for path, fingerprint_now in inputs.items():
        entry = remembered.get(path, fingerprint_now)
        if entry is None:
            continue
        facts = Facts.from_json(entry["facts"])
        if "plan" in entry:
            known[path] = Known(facts, Plan.model_validate(entry["plan"]))
        elif _on_disk(docs, entry["pages"]):  # a page edited or removed since: render again
            card = Card.from_json(entry["card"], entry["digest"])
            known[path] = Known(facts, RecordPages(card, entry["pages"], entry["related"]))
    return known


def code_key(templates: Path | None) -> str:
    """Changes whenever kbgen, its templates or any file of the user's templates folder does."""
    digest = hashlib.sha256(__version__.encode())
    package = Path(str(resources.files("kbgen")))
    sources = [
        path for kind in ("j2", "js", "css", "py") for path in sorted(package.rglob(f"*.{kind}"))
    ]
    if templates is not None:  # every file: a template may include or import any of them
        sources += sorted(p for p in templates.rglob("*") if p.is_file())
    for path in sources:
        digest.update(f"{path}:{fingerprint(path)}\n".encode())
    return digest.hexdigest()


def _inputs_key(inputs: dict[Path, Fingerprint], code: str) -> str:
    """Changes whenever a record or a plan does, or `code` (`code_key`)."""
    digest = hashlib.sha256(code.encode())
    for path, known in inputs.items():
        digest.update(f"{path}:{known}\n".encode())
    return digest.hexdigest()


def _last_render(cache: Path | None) -> dict[str, Any]:
    """What the last render remembered; nothing when there is no cache or it is unreadable."""
    try:
        return read_json(cache) if cache is not None else {}
    except InvalidInput:
        return {}


def _fingerprint(path: Path) -> Fingerprint | None:
    try:
        return fingerprint(path)
    except OSError:
        return None


def _on_disk(docs: Path, outputs: dict[str, Fingerprint | None]) -> bool:
    """Whether every file named in `outputs` still has its fingerprint (and there is one)."""
    # os.stat on strings, not Path objects: this runs over every generated file on a no-op
    folder = str(docs)
    try:
        for rel, known in outputs.items():
            stat = os.stat(os.path.join(folder, rel))
            if [stat.st_size, stat.st_mtime_ns, stat.st_ino] != known:
                return False
    except OSError:
        return False
    return bool(outputs)
