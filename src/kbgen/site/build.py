"""`kbgen render` end to end: skip when nothing changed, else load, render and write in parallel.

The no-op check comes first and is stats only: when neither the inputs (records, plans,
templates, kbgen itself) nor the pages written last time changed — by size, mtime and inode,
remembered in `.kbgen_cache/render.json` — nothing is parsed or rendered. This module imports
no YAML, Pydantic or Jinja until that check fails: on a large knowledge base, those imports
would otherwise be most of a no-op's time.

Otherwise each record's page is rendered, compared and written in the process that parsed it
(`kb.load(each=)`), and the pages over many records — plans and indexes — are made here from
small cards. A record file unchanged since the last render, whose page is unchanged too, is not
even parsed: its card comes from `.kbgen_cache/render-records.json`, so changing one record of
thousands re-renders that record's page and the indexes only.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from kbgen import __version__
from kbgen.errors import InvalidInput
from kbgen.kb.files import fingerprint, iter_yaml_files, read_json, write_atomic

CACHE = Path(".kbgen_cache") / "render.json"
# the folders of generated pages: their mtime changes when a page is added or removed there
GENERATED = ("records", "plans")


def render_site(
    records: Path,
    docs: Path,
    templates: Path | None = None,
    check: bool = False,
    cache: Path | None = CACHE,
) -> list[str]:
    """Render the knowledge base under `records` into `docs`; with `check`, only compare.

    Returns the pages written or removed (with `check`: those that are stale), relative to docs.
    """
    files = iter_yaml_files([records])
    code = _code_key(templates)
    key = _inputs_key(files, code) + str(docs.absolute())
    last = _last_render(cache)
    if last.get("key") == key and _outputs_unchanged(docs, last.get("outputs", {})):
        return []

    from kbgen.kb import loading as kb
    from kbgen.kb.models import Plan
    from kbgen.site import render

    # record pages need the plans' task texts: read those few files first
    plans: list[Plan] = []
    for path in files:
        if kb.kind_of(path) is Plan:
            try:
                plans.append(kb.load_model(path, Plan))
            except InvalidInput:
                continue  # reported by the full load below
    job = render.Job(docs, records, templates, render.task_texts(plans), check)
    where = [str(docs.absolute()), str(records.absolute())]
    rules = json.dumps([code, *where, job.tasks], sort_keys=True)
    base = kb.load(
        [records],
        each=functools.partial(render.rendered, job),
        cache=None if cache is None else cache.with_name("render-records.json"),
        cache_key=hashlib.sha256(rules.encode()).hexdigest(),
        # a record whose pages were edited or removed since is rendered again
        trust=lambda product: "plan" in product or _outputs_unchanged(docs, product["pages"]),
    )
    if base.problems:
        raise InvalidInput(base.problems)
    cards, produced, stale = [], [], []
    plan_models, sources = {}, {}
    for path, product in base.products.items():
        if "plan" in product:
            plan = Plan.model_validate(product["plan"])
            plan_models[plan.id], sources[plan.id] = plan, render.source_of(path, records)
            continue
        if path in base.from_cache:
            product = {**product, "stale": []}  # trusted: its pages are as written then
        cards.append(kb.Card.from_json(product["card"]))
        produced += product["pages"]
        stale += product["stale"]
    site = render.site_pages(render.cached_environment(templates), plan_models, sources, cards)
    produced += site
    if check:
        removed = render.stale_outputs(docs, set(produced))
        changed = render.changed(docs, site)
        return sorted(stale + changed) + [str(p.relative_to(docs)) for p in removed]
    written = stale + [str(p.relative_to(docs)) for p in render.write(docs, site, produced)]
    if cache is not None:
        folders = [rel for rel in GENERATED if (docs / rel).is_dir()]
        outputs = {rel: fingerprint(docs / rel) for rel in [*sorted(produced), *folders]}
        write_atomic(cache, json.dumps({"key": key, "outputs": outputs}).encode())
    return written


def _code_key(templates: Path | None) -> str:
    """Changes whenever kbgen, its templates or any file of the user's templates folder does."""
    digest = hashlib.sha256(__version__.encode())
    package = Path(str(resources.files("kbgen")))
    sources = [*sorted(package.rglob("*.j2")), *sorted(package.rglob("*.py"))]
    if templates is not None:  # every file: a template may include or import any of them
        sources += sorted(p for p in templates.rglob("*") if p.is_file())
    for path in sources:
        digest.update(f"{path}:{fingerprint(path)}\n".encode())
    return digest.hexdigest()


def _inputs_key(files: list[Path], code: str) -> str:
    """Changes whenever a record or a plan does, or `code` (`_code_key`)."""
    digest = hashlib.sha256(code.encode())
    for path in files:
        digest.update(f"{path}:{fingerprint(path)}\n".encode())
    return digest.hexdigest()


def _last_render(cache: Path | None) -> dict[str, Any]:
    """What the last render remembered; nothing when there is no cache or it is unreadable."""
    try:
        return read_json(cache) if cache is not None else {}
    except InvalidInput:
        return {}


def _outputs_unchanged(docs: Path, outputs: dict[str, list[int] | None]) -> bool:
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
