"""prompts: the repository's suite, truncation per class, and errors that name file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kbgen.cli import cli
from kbgen.errors import InvalidInput
from kbgen.run import prompts
from tests.conftest import REPO
from tests.support import special
from tests.support.properties import SETTINGS, examples
from tests.support.specs import small_spec

SEED = REPO / "bench" / "prompts" / "seed.jsonl"
CLASSES = ["coding", "math", "explanatory"]


def _seed_by_class() -> dict[str, list[str]]:
    expected: dict[str, list[str]] = {name: [] for name in CLASSES}
    for line in SEED.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            expected[entry["class"]].append(entry["prompt"])
    return expected


def test_seed_suite_has_12_prompts_per_class_in_file_order() -> None:
    suite = prompts.load(SEED, CLASSES)
    assert list(suite) == CLASSES
    assert {name: len(p) for name, p in suite.items()} == dict.fromkeys(CLASSES, 12)
    assert suite == _seed_by_class()
    assert all(isinstance(p, str) and p.strip() for ps in suite.values() for p in ps)


@pytest.mark.parametrize(
    ("per_class", "expected_len"),
    [
        pytest.param(None, 12, id="all"),
        pytest.param(3, 3, id="first-3"),
        pytest.param(1, 1, id="first-1"),
        pytest.param(12, 12, id="exactly-all"),
        pytest.param(100, 12, id="more-than-there-are"),
    ],
)
def test_per_class_truncates_keeping_file_order(per_class: int | None, expected_len: int) -> None:
    suite = prompts.load(SEED, CLASSES, per_class=per_class)
    expected = _seed_by_class()
    assert suite == {name: expected[name][:expected_len] for name in CLASSES}


def test_only_the_wanted_classes_are_loaded() -> None:
    assert prompts.load(SEED, ["math"]) == {"math": _seed_by_class()["math"]}


def test_a_line_without_class_is_in_the_default_class(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a"}\n\n{"class": "x", "prompt": "b"}\n{"prompt": "c"}\n')
    assert prompts.load(path, ["default", "x"]) == {"default": ["a", "c"], "x": ["b"]}


GOOD = '{"class": "coding", "prompt": "p1"}\n{"class": "math", "prompt": "p2"}\n'


@pytest.mark.parametrize(
    ("content", "classes", "line", "match"),
    [
        pytest.param(
            GOOD + '{"class": "coding", "prompt": \n',
            CLASSES[:2],
            3,
            "not JSON",
            id="not-json-line-3",
        ),
        pytest.param(
            GOOD + "\n\nnot json at all\n", CLASSES[:2], 5, "not JSON", id="blank-lines-still-count"
        ),
        pytest.param(
            '{"class": "coding", "prompt": "p"}\n{"class": "coding"}\n',
            ["coding"],
            2,
            "needs a string `prompt`",
            id="no-prompt",
        ),
        pytest.param(
            GOOD + '{"class": "coding", "prompt": 5}\n',
            CLASSES[:2],
            3,
            "needs a string",
            id="prompt-not-a-string",
        ),
        pytest.param(
            GOOD + '["coding", "p"]\n', CLASSES[:2], 3, "needs a string", id="line-not-an-object"
        ),
        pytest.param(
            GOOD,
            ["coding", "math", "explanatory"],
            None,
            "no prompt of class 'explanatory'",
            id="missing-class",
        ),
    ],
)
def test_malformed_file_names_file_and_line(
    tmp_path: Path, content: str, classes: list[str], line: int | None, match: str
) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInput, match=match) as info:
        prompts.load(path, classes)
    (problem,) = info.value.problems
    assert problem.path == path
    assert problem.line == line
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert str(problem).startswith(where)
    assert str(info.value).startswith(where)


def test_every_problem_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text('{"class": "coding", "prompt": "ok"}\n{oops\n{"class": "coding"}\n')
    with pytest.raises(InvalidInput, match=r"suite\.jsonl:2: not JSON") as info:
        prompts.load(path, ["coding", "math"])
    assert [(p.line, p.field) for p in info.value.problems] == [
        (None, "class"),
        (2, ""),
        (3, "prompt"),
    ]


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.jsonl"
    with pytest.raises(InvalidInput, match=r"nowhere\.jsonl: no such prompt file") as info:
        prompts.load(path, CLASSES)
    (problem,) = info.value.problems
    assert (problem.path, problem.line) == (path, None)


def test_file_that_is_not_utf8_is_located_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    good = '{"class": "coding", "prompt": "ok"}\n'
    path.write_bytes(good.encode() + '{"class": "coding", "prompt": "café"}\n'.encode("latin-1"))
    with pytest.raises(InvalidInput) as info:
        prompts.load(path, ["coding"])
    assert str(info.value) == f"{path}:2: not UTF-8 text (byte 0xe9)"


@pytest.mark.parametrize("kind", sorted(special.SPECIAL))
def test_a_special_file_is_one_located_line_never_a_hang(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "prompts" / "suite.jsonl"
    message = special.make(kind, path)
    with special.deadline(5), pytest.raises(InvalidInput) as info:
        prompts.load(path, ["coding"])
    assert str(info.value).startswith(f"{path}: {message}")
    assert len(str(info.value).splitlines()) == 1


def test_a_suite_over_the_limit_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text('{"class": "coding", "prompt": "a"}\n' * 10)
    monkeypatch.setattr(prompts, "MAX_BYTES", 100)
    with pytest.raises(InvalidInput, match=r"suite\.jsonl: too large .*the limit is 100\b"):
        prompts.load(path, ["coding"])


def test_a_line_separator_inside_a_prompt_is_part_of_the_prompt(tmp_path: Path) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text('{"class": "coding", "prompt": "a\u2028b"}\n', encoding="utf-8")
    assert prompts.load(path, ["coding"]) == {"coding": ["a\u2028b"]}


def test_a_class_that_is_not_a_string_is_invalid_input(tmp_path: Path) -> None:
    path = tmp_path / "suite.jsonl"
    path.write_text('{"class": "coding", "prompt": "a"}\n{"class": ["coding"], "prompt": "b"}\n')
    with pytest.raises(InvalidInput, match=r"suite\.jsonl:2: class"):
        prompts.load(path, ["coding"])


@pytest.mark.parametrize("kind", ["missing", "fifo", "folder", "latin-1"])
def test_a_spec_whose_suite_is_unreadable_leaves_no_run_folder(tmp_path: Path, kind: str) -> None:
    spec = small_spec(tmp_path)
    suite = Path(spec.workload.prompts or "")
    suite.unlink()
    if kind == "latin-1":
        suite.write_bytes('{"class": "coding", "prompt": "café"}\n'.encode("latin-1"))
    elif kind != "missing":
        special.make(kind, suite)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    with special.deadline(10):
        result = CliRunner().invoke(
            cli, ["bench", str(spec_file), "--runs", str(tmp_path / "runs")]
        )
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(str(suite)) and "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
_ENTRIES = st.fixed_dictionaries(
    {},
    optional={
        "class": st.sampled_from(["coding", "math"]) | _JSON_VALUES,
        "prompt": st.text(max_size=40) | _JSON_VALUES,
        "extra": _JSON_VALUES,
    },
)
_LINES = st.one_of(
    _ENTRIES.map(lambda entry: json.dumps(entry).encode()),
    _JSON_VALUES.map(lambda value: json.dumps(value).encode()),
    st.text(max_size=60).map(str.encode),
    st.binary(max_size=60),
)
_GOOD = st.builds(
    lambda cls, prompt, end: json.dumps({"class": cls, "prompt": prompt}).encode() + end,
    st.sampled_from(["coding", "math", "other"]) | st.text(max_size=8),
    st.text(max_size=40),
    st.sampled_from([b"", b"\r", b" "]),
)
SUITES = st.one_of(
    st.lists(_GOOD | st.just(b""), min_size=2, max_size=12).map(b"\n".join),  # mostly loads
    st.lists(_GOOD | _LINES, max_size=12).map(b"\n".join),
    st.binary(max_size=2_000),
    st.text(max_size=2_000).map(str.encode),
)


@settings(SETTINGS, max_examples=examples(300))
@given(content=SUITES, per_class=st.none() | st.integers(min_value=1, max_value=3))
@example(content=b'{"class": "coding", "prompt": ' + b"1" * 5_000 + b"}", per_class=None)
@example(content=b'{"class": "coding", "prompt": "x"}\n' + b"[" * 100_000, per_class=None)
def test_any_suite_loads_or_is_located_problems(
    tmp_path: Path, content: bytes, per_class: int | None
) -> None:
    """Whatever the file holds: its prompts, or an InvalidInput whose every problem is
    located in it — never another exception, never a hang."""
    path = tmp_path / "suite.jsonl"
    path.write_bytes(content)
    try:
        with special.deadline(5):
            suite = prompts.load(path, ["coding", "math"], per_class)
    except InvalidInput as exc:
        assert exc.problems and all(p.path == path for p in exc.problems)
        assert all(str(p).startswith(f"{path}:") and "\n" not in str(p) for p in exc.problems)
    else:
        assert set(suite) == {"coding", "math"}
        assert all(
            prompts_ and all(isinstance(p, str) for p in prompts_) for prompts_ in suite.values()
        )


def test_a_line_may_name_its_prompt_s_group(tmp_path: Path) -> None:
    path = tmp_path / "suite.jsonl"
    lines = [
        {"class": "chat", "prompt": "a", "group": "greeting"},
        {"class": "chat", "prompt": "b"},
        {"class": "code", "prompt": "c", "group": "sort"},
        {"class": "chat", "prompt": "d", "group": "greeting"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert prompts.groups(path, ["chat", "code"]) == {
        "chat": ["greeting", None, "greeting"],
        "code": ["sort"],
    }
    assert prompts.groups(path, ["chat"], per_class=1) == {"chat": ["greeting"]}
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"class": "chat", "prompt": "a"}) + "\n")
    assert prompts.groups(plain, ["chat"]) is None
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"class": "chat", "prompt": "a", "group": 3}) + "\n")
    with pytest.raises(InvalidInput, match="`group` must be a string") as raised:
        prompts.read(bad)
    assert raised.value.problems[0].line == 1
