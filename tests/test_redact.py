"""redact: the secrets corpus masked in place, look-alikes kept, in argv, env, trees and text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbgen import redact
from kbgen.redact import MASK
from tests.support.properties import examples
from tests.support.secrets import FORMS, KEPT_ARGS, KEPT_ENV, PEM, Form, every_secret, s

SK = "sk-proj-abcDEF0123456789"


def _redacted(form: Form) -> list[str] | dict[str, str]:
    return redact.env(form.given) if isinstance(form.given, dict) else redact.args(form.given)


def test_the_corpus_has_forty_forms_each_secret_its_own() -> None:
    assert len(FORMS) >= 40
    assert len(set(every_secret())) == len(every_secret())


@pytest.mark.parametrize("form", FORMS, ids=[f.id for f in FORMS])
def test_every_form_is_masked_in_place(form: Form) -> None:
    before = json.dumps(form.given)
    got = _redacted(form)
    assert got == form.expected  # the names kept, nothing moved, nothing lost
    assert not [secret for secret in form.secrets if secret in json.dumps(got)]
    assert json.dumps(form.given) == before  # not modified in place


@pytest.mark.parametrize("argv", KEPT_ARGS, ids=[" ".join(a) for a in KEPT_ARGS])
def test_look_alikes_are_kept(argv: list[str]) -> None:
    assert redact.args(argv) == argv


def test_look_alike_variables_are_kept() -> None:
    assert redact.env(KEPT_ENV) == KEPT_ENV


def test_a_secret_opt_equals_value_keeps_the_next_argument() -> None:
    """The mask once moved from `--opt={…secret…}` onto the next argument: the record kept the
    secret and lost `--tensor-parallel-size`."""
    argv = [f'--hf-overrides={{"auth_token":"{s(901)}"}}', "--tensor-parallel-size", "8"]
    assert redact.args(argv) == [
        f'--hf-overrides={{"auth_token":"{MASK}"}}',
        "--tensor-parallel-size",
        "8",
    ]


@given(st.lists(st.sampled_from([f for f in FORMS if isinstance(f.given, list)]), max_size=8))
@settings(derandomize=True, max_examples=examples(200), deadline=None)
def test_forms_side_by_side_are_masked_as_each_alone(forms: list[Form]) -> None:
    """No mask leaks from one argument into the next, whatever stands beside it."""
    kept = [a for argv in KEPT_ARGS for a in argv]
    argv = [a for f in forms for a in [*f.given, *kept[:2]]]
    expected = [a for f in forms for a in [*f.expected, *kept[:2]]]
    assert redact.args(argv) == expected


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        *[(n, True) for n in ("HF_TOKEN", "--hf-token", "X-Auth-Token", "apiKey", "APIKEY")],
        *[(n, True) for n in ("X-Api-Key", "ACCESS_KEY", "GITHUB_PAT", "PGPASSWORD", "--pwd")],
        *[(n, True) for n in ("--auth", "Cookie", "SENTRY_DSN", "HFToken", "X-Amz-Signature")],
        *[(n, False) for n in ("--max-num-batched-tokens", "--tokenizer", "eos_token_id")],
        *[(n, False) for n in ("--long-prefill-token-threshold", "author", "pass_config")],
        *[(n, False) for n in ("TOKENIZERS_PARALLELISM", "--kv-cache-dtype", "keyfile", "")],
        # however it is written: no separators at all
        *[(n, True) for n in ("HFTOKEN", "GITHUBTOKEN", "--hftoken", "MYSECRETKEY", "DBPASSWORD")],
        *[(n, False) for n in ("MAXTOKENS", "--detokenize", "NUMTOKENS", "tokenizer_mode")],
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert redact.is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["curl", "-u", "kb:hunter2", "URL"], ["curl", "-u", f"kb:{MASK}", "URL"]),
        (["curl", "--user=kb:hunter2"], ["curl", f"--user=kb:{MASK}"]),
        (["wget", "--proxy-user", "me:pa55", "URL"], ["wget", "--proxy-user", f"me:{MASK}", "URL"]),
        (["curl", "-u", "justauser", "URL"], ["curl", "-u", "justauser", "URL"]),  # no password
    ],
)
def test_a_user_option_keeps_the_user_and_masks_the_password(
    argv: list[str], expected: list[str]
) -> None:
    assert redact.args(argv) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            f"INFO non-default args: {{'model': '/m', 'api_key': ['{s(1)}'], 'port': 8000}}",
            f"INFO non-default args: {{'model': '/m', 'api_key': [{MASK}], 'port': 8000}}",
            id="vllm-non-default-args",
        ),
        pytest.param(
            f"Namespace(api_key='{s(2)}', hf_token=None, port=8000)",
            f"Namespace(api_key='{MASK}', hf_token={MASK}, port=8000)",
            id="namespace-repr",
        ),
        pytest.param(
            f"http://kb:{s(3)}@127.0.0.1:1/health: Cannot connect",
            f"http://kb:{MASK}@127.0.0.1:1/health: Cannot connect",
            id="url-in-an-error",
        ),
        pytest.param(
            f"`HF_TOKEN={s(4)} ./start.sh --api-key '{s(5)}' --port 8000` exited with code 3",
            f"`HF_TOKEN={MASK} ./start.sh --api-key '{MASK}' --port 8000` exited with code 3",
            id="a-failed-command",
        ),
        pytest.param(
            f'vllm:tokens_total{{model_name="https://u:{s(6)}@hub/m"}} 12',
            f'vllm:tokens_total{{model_name="https://u:{MASK}@hub/m"}} 12',
            id="a-metrics-label",
        ),
        pytest.param(
            f'{{"password": "{s(7)}", "n": 1}}', f'{{"password": "{MASK}", "n": 1}}', id="json"
        ),
        pytest.param(f"serve {SK} now", f"serve {MASK} now", id="token-shape"),
        pytest.param(
            "curl -fsS -u kb:hunter2 http://127.0.0.1:8000/health && curl --user 'ops:pa55' x",
            f"curl -fsS -u kb:{MASK} http://127.0.0.1:8000/health && curl --user 'ops:{MASK}' x",
            id="curl-user-password",
        ),
        pytest.param(
            "HFTOKEN=hunter2 GITHUBTOKEN=pa55word MAXTOKENS=128 ./start.sh",
            f"HFTOKEN={MASK} GITHUBTOKEN={MASK} MAXTOKENS=128 ./start.sh",
            id="names-without-separators",
        ),
        pytest.param(
            "1 request(s) with 512 tokens in 3.2 s",
            "1 request(s) with 512 tokens in 3.2 s",
            id="prose",
        ),
    ],
)
def test_text(line: str, expected: str) -> None:
    assert redact.text(line) == expected


def test_a_private_key_across_lines_of_a_stream() -> None:
    lines = redact.Lines()
    got = "".join(lines(line) for line in f"key:\n{PEM}\nready\n".splitlines(keepends=True))
    assert "S3cr3t0038" not in got and got.endswith("-----END RSA PRIVATE KEY-----\nready\n")


def test_a_tree_is_masked_by_its_keys_at_any_depth() -> None:
    tree = {
        "server": {
            "url": f"http://u:{s(1)}@h:8000",
            "args": ["--api-key", s(2), "--port", "8000"],
            "env": {"HF_TOKEN": s(3), "HF_HOME": "/hf"},
        },
        "extra": [{"credentials": {"user": "bob", "password": s(4)}, "port": 8000}],
        "numbers": {"secret": 12345, "token_count": 3},
        "vault": {"api_key": {"value": s(5), "ttl": 60}, "password": {"ref": {"raw": s(6)}}},
    }
    assert redact.data(tree) == {
        "server": {
            "url": f"http://u:{MASK}@h:8000",
            "args": ["--api-key", MASK, "--port", "8000"],
            "env": {"HF_TOKEN": MASK, "HF_HOME": "/hf"},
        },
        "extra": [{"credentials": {"user": "bob", "password": MASK}, "port": 8000}],
        "numbers": {"secret": MASK, "token_count": 3},
        "vault": {"api_key": {"value": MASK, "ttl": MASK}, "password": {"ref": {"raw": MASK}}},
    }


def test_a_tree_without_secrets_is_the_same_object() -> None:
    tree = {"args": ["--port", "8000"], "order": [(0, "a")], "n": 1.5}
    assert redact.data(tree) is tree


FRAGMENTS = [
    *("--api-key", "HF_TOKEN", "Authorization", "Cookie", "password", "Bearer", "eos_token_id"),
    *(" ", "=", ": ", "'", '"', "\\", "{", "}", "[", "]", ",", ";", "&", "\n", "-", "//"),
    *("http://u:", "@h/", "?token=", "${X}", "$X", MASK, s(1), SK, "8000"),
    *("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"),
]


@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=30).map("".join))
@settings(derandomize=True, max_examples=examples(300), deadline=None)
def test_text_never_fails_and_masks_once(value: str) -> None:
    once = redact.text(value)
    assert redact.text(once) == once


@given(st.lists(st.text(max_size=40), max_size=8))
@settings(derandomize=True, max_examples=examples(300), deadline=None)
def test_args_never_fail_nor_change_the_count(argv: list[str]) -> None:
    assert len(redact.args(argv)) == len(argv)


def test_known_secrets_are_masked_however_a_server_echoes_them() -> None:
    argv = ["m", "--api-key", s(1), f"--hf-token={s(2)}", "--port", "8000"]
    known = redact.known(argv, {"HF_TOKEN": s(3), "HF_HOME": "/hf"})
    assert known == {s(1), s(2), s(3)}
    lines = redact.Lines(known)
    echoed = [lines(f"{arg}\n") for arg in argv]  # one argument a line: no name beside a value
    assert echoed == [
        "m\n",
        "--api-key\n",
        f"{MASK}\n",
        f"--hf-token={MASK}\n",
        "--port\n",
        "8000\n",
    ]


def test_found_names_the_key_path_of_every_secret_and_nothing_else() -> None:
    tree = {
        "title": "n-gram, 512 max tokens",
        "config": {"server_args": ["--api-key", "k3y-Value-0042", "--tensor-parallel-size", "8"]},
        "notes": [{"text": "fine"}, {"text": "Bearer abcdefghijklmnopqrstuvwxyz012345"}],
        "env": {"HF_TOKEN": "plain-looking"},
    }
    assert redact.found(tree) == [
        ["config", "server_args", 1],
        ["notes", 1, "text"],
        ["env", "HF_TOKEN"],
    ]
    assert redact.found({"title": "nothing here", "n": 3}) == []
