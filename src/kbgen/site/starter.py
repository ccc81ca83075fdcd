"""`kbgen init`: a knowledge base in any repository, from the kit kbgen ships (`starter_kit/`).

Every file is written only where none is there (a user's file is never replaced), so running
it again adds what is missing and changes nothing else; `.gitignore` gains the lines it lacks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kbgen import __version__
from kbgen.errors import Conflict, StoreError
from kbgen.kb import files

# the kit's file -> where it goes in the repository (the kit names no hidden file: package
# data keeps them unreliably)
FILES = {
    "records/plans/first-plan.yaml": "records/plans/first-plan.yaml",
    "mkdocs.yml": "mkdocs.yml",
    "docs/index.md": "docs/index.md",
    "docs/tags.md": "docs/tags.md",
    "docs/hooks/kbgen_render.py": "docs/hooks/kbgen_render.py",
    "github/workflows/kbgen-review.yml": ".github/workflows/kbgen-review.yml",
    "github/workflows/kbgen-pages.yml": ".github/workflows/kbgen-pages.yml",
    "pre-commit-config.yaml": ".pre-commit-config.yaml",
}
GITIGNORE = "gitignore"  # its lines are added to the repository's .gitignore where missing


@dataclass
class Started:
    """What `init` did, by path relative to the repository."""

    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # there already: left as they were
    ignored: list[str] = field(default_factory=list)  # lines added to .gitignore
    rendered: list[str] = field(default_factory=list)  # the pages written into docs/
    foreign: list[str] = field(default_factory=list)  # not kbgen's, where its pages go: no render

    def said(self, root: Path) -> list[str]:
        """What `kbgen init` prints, a line per thing done, paths under `root`."""
        return [
            *(f"wrote {root / rel}" for rel in self.written),
            *(f"kept {root / rel} (already there)" for rel in self.kept),
            *(f"added {line} to {root / '.gitignore'}" for line in self.ignored),
            *(
                f"not rendered: {root / 'docs' / rel} is not a page kbgen wrote (move it away, "
                "then `kbgen render`)"
                for rel in self.foreign
            ),
            *([f"rendered {len(self.rendered)} page(s) into {root / 'docs'}"] * (not self.foreign)),
            "next: `kbgen new TITLE` for a record, `mkdocs serve` to browse",
        ]


def kit(name: str) -> str:
    """The text of one of the kit's files (`FILES`, `GITIGNORE`)."""
    return (resources.files("kbgen.site") / "starter_kit" / name).read_text(encoding="utf-8")


def contents(site_name: str, version: str = __version__) -> dict[str, str]:
    """What `init` writes, by path in the repository: the kit with the site's name and the
    kbgen version that the workflows install filled in."""
    fills = {
        '"@SITE_NAME@"': json.dumps(site_name),  # a JSON string is a YAML one
        "@SITE_NAME@": site_name,
        "@KBGEN_REQUIREMENT@": f"kbgen=={version}",
        "@KBGEN_SITE_REQUIREMENT@": f"kbgen[site]=={version}",
    }
    out = {}
    for source, target in FILES.items():
        text = kit(source)
        for placeholder, value in fills.items():
            text = text.replace(placeholder, value)
        out[target] = text
    out.update(schemas())
    return out


def schemas() -> dict[str, str]:
    """The JSON Schemas of records, plans and experiment specs, by path in the repository
    (`kbgen schema` writes the same)."""
    from kbgen.kb.models import json_schemas
    from kbgen.run.spec import ExperimentSpec

    every = {**json_schemas(), "experiment.schema": ExperimentSpec.model_json_schema()}
    return {
        f"docs/schema/{stem}.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n"
        for stem, body in every.items()
    }


def init(root: Path, site_name: str | None = None) -> Started:
    """The kit written into `root` where its files are missing, `.gitignore` completed, the
    pages rendered."""
    from kbgen.site.build import CACHE, foreign_pages, render_site

    name = site_name or f"{root.resolve().name or 'kbgen'} knowledge base"
    started = Started()
    for rel, text in contents(name).items():
        path = root / rel
        if path.exists() or path.is_symlink():
            started.kept.append(rel)
            continue
        try:
            files.write_atomic(path, text.encode(), replace=False)
        except Conflict:  # created meanwhile: theirs, kept
            started.kept.append(rel)
        else:
            started.written.append(rel)
    started.ignored = _complete_gitignore(root / ".gitignore")
    started.foreign = foreign_pages(root / "docs")
    if not started.foreign:
        started.rendered = render_site(root / "records", root / "docs", cache=root / CACHE)
    return started


def _complete_gitignore(path: Path) -> list[str]:
    """The kit's ignore lines that `path` lacks, appended to it (created if missing)."""
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: cannot read: {exc}") from exc
    have = {line.strip() for line in text.splitlines()}
    heading, *wanted = kit(GITIGNORE).splitlines()  # a comment, then the lines
    missing = [line for line in wanted if line not in have]
    if missing:
        lead = "" if not text or text.endswith("\n") else "\n"
        addition = "\n".join([heading, *missing]) + "\n"
        files.write_atomic(path, f"{text}{lead}{addition}".encode(), replace=path.exists())
    return missing
