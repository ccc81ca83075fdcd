"""Hostile text for the site's tests: a payload corpus, records and a plan that carry it in every
text field, Python-Markdown configured as the site's MkDocs, and what a browser would find
unsafe in HTML."""

from __future__ import annotations

import copy
import functools
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import markdown
import yaml
from mkdocs.utils.yaml import yaml_load  # reads the !ENV tags of mkdocs.yml

from tests.conftest import PLAN, RECORD

REPO = Path(__file__).resolve().parents[2]

# Each tries one way to get a live script, handler or link past the site: Markdown links and
# images in every syntax, scheme tricks (case, entities, whitespace, controls), reference
# definitions, autolinks, raw HTML, attribute lists, escapes, block syntax and breaking out of a
# table, a heading or the page's HTML comment.
PAYLOADS = [
    "[inline](javascript:alert(1))",
    "[case](JaVaScRiPt:alert(1))",
    "[entity](java&#115;cript:alert(1))",
    "[named entity](javascript&colon;alert(1))",
    "[leading entity](&#106;avascript:alert(1))",
    "[newline](\njavascript:alert(1))",
    "[tab](java\tscript:alert(1))",
    "[control](\x01javascript:alert(1))",
    "[space and title]( javascript:alert(1) 'title')",
    "[angle](<javascript:alert(1)>)",
    '[angle title](<javascript:alert(1)> "t")',
    "![image](javascript:alert(1))",
    "![svg](data:image/svg+xml,<svg onload=alert(1)>)",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[vbscript](vbscript:msgbox(1))",
    "[file](file:///etc/passwd)",
    "[full][r]\n\n[r]: javascript:alert(1)",
    "[r]\n\n[r]: javascript:alert(1)",
    "[r][]\n\n[r]: JAVASCRIPT:alert(1)",
    '[title def][r]\n\n[r]: <javascript:alert(1)> "t"',
    "- item\n\n    [r]: javascript:alert(1)\n\n[nested def][r]",
    "> [r]: javascript:alert(1)\n\n[quoted def][r]",
    "[def on next line][r]\n\n[r]:\n  javascript:alert(1)",
    "[r]:\n```\njavascript:alert(1)\n```\n\n[fenced def][r]",
    "[code in destination](`javascript:alert(1)`)",
    "[reference in destination]([javascript:alert(1)][ok])\n\n[ok]: https://ok.example",
    "<javascript:alert(1)>",
    "<JaVaScRiPt:alert(1)>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">raw link</a>',
    "<svg onload=alert(1)>",
    '<iframe src="javascript:alert(1)"></iframe>',
    "<script>alert(1)</script>",
    '<object data="javascript:alert(1)"></object><embed src="javascript:alert(1)">',
    '<form action="javascript:alert(1)"><button formaction="javascript:alert(1)">x</button>',
    '<math><a xlink:href="javascript:alert(1)">math</a></math>',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
    '<base href="javascript:alert(1)//">',
    "<div markdown=1>[md in html](javascript:alert(1))</div>",
    "--><img src=x onerror=alert(1)>",
    "<!-- --><img src=x onerror=alert(1)> -->",
    "&lt;img src=x onerror=alert(1)&gt;",
    "\\[escaped](javascript:alert(1))",
    "\\\\[double backslash](javascript:alert(1))",
    "\\<img src=x onerror=alert(1)>",
    "cell | <img src=x onerror=alert(1)> |\n|---|---|\n| [t](javascript:alert(1)) | x |",
    'paragraph\n{: onclick="alert(1)" }',
    "inline{: onclick=alert(1) }",
    "```\n[r]: javascript:alert(1)\n```\n\n[after fence][r]",
    '!!! note "<img src=x onerror=alert(1)>"\n    [admonition](javascript:alert(1))',
    "# heading\n[under heading](javascript:alert(1))",
    "*[HTML]: <img src=x onerror=alert(1)>",
    "[^1]\n\n[^1]: <img src=x onerror=alert(1)>",
    "x\x02wzxhzdk:0\x03y\x02klzzwxh:0\x03z",
    "javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "`code` and ``double `tick` code`` and a stray ` tick",
    "C# and __dunder__ and *stars* and 1. list\n2. items\n- dash\n+ plus\n===\n~~~",
    "[safe](https://ok.example/a?b=1&c=2) and <https://ok.example> and [mail](mailto:a@b.example)",
]

PAYLOAD = "\n\n".join(PAYLOADS)  # all of them in one text, to meet each other


def _text_fields(record: dict[str, Any], text: str) -> None:
    """Every free-text field of `record` (a dict of the example record) set to `text`."""
    one = text[:200] or "x"
    record["title"] = one
    record["context"] = record["decision"] = record["consequences"] = text
    record["hypothesis"]["statement"] = text
    config = record["config"]
    config["engine"] = {"name": text, "version": text}
    config["model"] = {"name": text, "quantization": text, "architecture": text}
    config["hardware"] = {"cpu": text, "host": text, "accelerator": text, "interconnect": text}
    config["server_args"] = [text, text]
    config["variants"]["ngram"]["args"] = [text]
    config["variants"]["eagle"] = {
        "args": [text],
        "speculative_config": {"method": "eagle", "model": one, "num_speculative_tokens": 3},
    }
    record["workload"] = {"prompt_suite": text, "classes": ["coding"]}
    verdict = record["verdict"]
    caveats = [text, f"coding: {text}", f"coding: and {text}"]  # the box lists a class's apart
    verdict.update(rule=text, rationale=text, caveats=caveats, estimator=text)
    verdict.update(guards=[text], reasons=[text])
    verdict["per_class"]["coding"]["reason"] = text
    path = "/".join(p if p != ".." else "x" for p in text.replace("\\", "").split("/"))
    record["raw_samples"] = {"path": path.lstrip("/") or "x"}
    record["provenance"] = {
        "source": "measured",
        "tool": text,
        "reference": text,
        "kbgen": {"version": text or "x", "commit": text or "x", "commit_from": "checkout"},
        "git_sha": text,
        "host": text,
        "run": text,
        "notes": [text, text],
    }


def hostile_record(record_id: str, text: str, resolves: list[str]) -> dict[str, Any]:
    """The example record (`tests.conftest.RECORD`) with `text` in every text field."""
    record: dict[str, Any] = yaml.safe_load(RECORD)
    record = copy.deepcopy(record)
    record["id"] = record_id
    record["resolves"] = resolves
    _text_fields(record, text)
    return record


def hostile_plan(plan_id: str, texts: list[str]) -> dict[str, Any]:
    """The example plan with one task per text, its title and context the texts joined."""
    plan: dict[str, Any] = yaml.safe_load(PLAN)
    plan["id"] = plan_id
    plan["title"] = " ".join(texts)[:200]
    plan["context"] = "\n\n".join(texts)
    plan["tasks"] = [{"id": f"t{i}", "text": text} for i, text in enumerate(texts)]
    return plan


def write_hostile_kb(records: Path) -> list[str]:
    """A knowledge base under `records`: one record per payload, one with all of them, and a
    plan whose tasks are the payloads and which every record resolves. Returns the record ids."""
    (records / "plans").mkdir(parents=True, exist_ok=True)
    texts = [*PAYLOADS, PAYLOAD]
    plan = hostile_plan("hostile-plan", texts)
    (records / "plans" / "hostile-plan.yaml").write_text(yaml.safe_dump(plan, allow_unicode=True))
    ids = []
    for i, text in enumerate(texts):
        record_id = f"hostile-{i}"
        record = hostile_record(record_id, text, [f"hostile-plan#t{i}"])
        (records / f"{record_id}.yaml").write_text(yaml.safe_dump(record, allow_unicode=True))
        ids.append(record_id)
    return ids


@functools.cache
def site_markdown() -> markdown.Markdown:
    """Python-Markdown with the site's extensions (mkdocs.yml, MkDocs' own and the attr_list
    that Material's tags plugin adds): what turns the pages into HTML."""
    config = yaml_load((REPO / "mkdocs.yml").read_text())
    extensions: list[str] = ["toc", "tables", "fenced_code", "attr_list"]
    configs: dict[str, Any] = {}
    for item in config["markdown_extensions"]:
        name, options = (item, {}) if isinstance(item, str) else next(iter(item.items()))
        extensions.append(name)
        configs[name] = options or {}
    return markdown.Markdown(extensions=extensions, extension_configs=configs)


def to_html(page: str) -> str:
    """`page` as the site's HTML (its front matter, which MkDocs takes off first, left out)."""
    if page.startswith("---\n"):
        page = page.split("\n---\n", 1)[1]
    return str(site_markdown().reset().convert(page))


URL_ATTRIBUTES = {
    "href", "src", "action", "formaction", "xlink:href", "data", "poster", "background",
    "cite", "ping", "srcset", "lowsrc", "dynsrc", "codebase", "manifest", "longdesc",
}  # fmt: skip
FORBIDDEN_TAGS = {
    "script", "iframe", "frame", "frameset", "object", "embed", "applet", "form", "base",
    "meta", "link", "button", "textarea", "select", "portal",
}  # fmt: skip
SAFE_SCHEMES = {"http", "https", "mailto"}


def scheme(url: str) -> str | None:
    """The scheme a browser reads in `url` (an attribute's decoded value), lower-case."""
    seen = re.sub("[\t\n\r]", "", url).strip("".join(map(chr, range(33))))
    found = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", seen)
    return found[1].lower() if found else None


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in FORBIDDEN_TAGS:
            self.problems.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on") or name == "srcdoc":
                self.problems.append(f"<{tag} {name}>")
            if name in URL_ATTRIBUTES and (s := scheme(value or "")) and s not in SAFE_SCHEMES:
                self.problems.append(f"<{tag} {name}={value!r}>")
            if name == "style" and re.search(r"url\(|expression", value or "", re.I):
                self.problems.append(f"<{tag} style={value!r}>")
            if tag == "meta" and name == "http-equiv":
                self.problems.append("<meta http-equiv>")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def problems(html: str) -> list[str]:
    """What in `html` could run a script or follow a live javascript:/data:/… link."""
    checker = _Checker()
    checker.feed(html)
    checker.close()
    return checker.problems
