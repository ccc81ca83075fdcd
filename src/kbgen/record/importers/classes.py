"""The classes of imported requests, taken from the kbgen prompt file the tool sent.

By text where the tool kept each request's prompt (GuideLLM), else by position where it kept
the order they were sent in (`vllm bench serve --dataset-name custom --disable-shuffle`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from kbgen.errors import InvalidInput, Problem
from kbgen.kb.models import ID_PATTERN
from kbgen.record.importers.imported import Imported, no_split
from kbgen.run import prompts

SLUG_RULE = "lower-case letters, digits and inner hyphens, at most 80 characters"


@dataclass(frozen=True)
class Suite:
    """The prompt file an import took its classes from."""

    path: Path
    classes: list[str]  # the classes its requests have, in the file's order
    sha256: str


def classify(found: list[Imported], path: Path) -> Suite:
    """Give every sample the class of its prompt in the suite at `path` (a kbgen prompt file):
    by text where the tool kept each request's prompt text (GuideLLM), else by position where it
    kept the order they were sent in (`vllm bench serve`, whose result file keeps no texts: with
    `--dataset-name custom --disable-shuffle` it sends the file's prompts in order). Each
    variant's notes say which. A file that does not match is InvalidInput naming it.
    """
    suite = prompts.read(path)
    bad = [
        Problem(path, p.line, "class", f"{p.prompt_class!r} is no class name: {SLUG_RULE}")
        for p in suite
        if not re.fullmatch(ID_PATTERN, p.prompt_class)
    ]
    if bad or not suite:
        raise InvalidInput(bad or [Problem(path, None, "", "no prompts")])
    for imported in found:
        matched = _match(imported, path, suite)
        for sample, prompt_class in zip(imported.samples, matched, strict=True):
            sample.prompt_class = prompt_class
        how = (
            "by prompt text (each request's prompt found in the file)"
            if imported.prompt_texts
            else "by position (the result file keeps no prompt texts: request i is taken to be "
            "the file's prompt i, as vllm bench serve --dataset-name custom --disable-shuffle "
            "sends them)"
        )
        imported.notes = [n for n in imported.notes if n != no_split(imported.variant)]
        imported.notes.append(f"{imported.variant}: classes from {path.name}, matched {how}")
    used = {s.prompt_class for imported in found for s in imported.samples}
    classes = [c for c in dict.fromkeys(p.prompt_class for p in suite) if c in used]
    return Suite(path, classes, hashlib.sha256(path.read_bytes()).hexdigest())


def _match(imported: Imported, path: Path, suite: list[prompts.Prompt]) -> list[str]:
    """The class of each of the import's samples, by prompt text or by position."""
    source = imported.source or Path(imported.variant)
    n = len(imported.samples)
    if imported.prompt_texts:
        classes: dict[str, set[str]] = {}
        for p in suite:
            classes.setdefault(p.text, set()).add(p.prompt_class)
        matched: list[str] = []
        for i, text in enumerate(imported.prompt_texts):
            found = classes.get(text, set()) if text is not None else set()
            if len(found) == 1:
                matched.append(found.pop())
                continue
            unmatched = sum(1 for t in imported.prompt_texts if t is None or t not in classes)
            message = (
                f"request {i} kept no prompt text to find in {path}"
                if text is None
                else f"the prompt of request {i} is in {path} under {len(found)} classes"
                if found
                else f"the prompt of request {i} is not in {path} ({unmatched} of {n} "
                "requests' prompts are not)"
            )
            raise InvalidInput([Problem(source, None, "", message)])
        return matched
    if not imported.in_order_sent or not n:
        raise InvalidInput(
            [
                Problem(
                    source,
                    None,
                    "",
                    "no per-request results in the order sent (vllm bench serve: run with "
                    "--save-detailed): --prompts cannot give its requests classes",
                )
            ]
        )
    if n != len(suite):
        raise InvalidInput(
            [
                Problem(
                    source,
                    None,
                    "",
                    f"{n} requests, but {path} holds {len(suite)} prompts: matching by position "
                    "needs one request per prompt, in the file's order (vllm bench serve "
                    f"--dataset-name custom --dataset-path {path.name} --disable-shuffle "
                    f"--num-prompts {len(suite)})",
                )
            ]
        )
    return [p.prompt_class for p in suite]
