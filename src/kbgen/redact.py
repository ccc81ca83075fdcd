"""The one secrets policy: what a secret is, and its value masked wherever kbgen writes or prints.

A value is secret by its name or its shape; `args`, `env`, `data` and `text` mask it in place
as `MASK`, its name kept, and keep `${NAME}` references. The names and shapes: docs/design.md,
"Secrets".
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any

MASK = "***"

# A secret word anywhere in the name; the others only as its last word, where they name the
# value itself (`--hf-token`, `--api-key`) and not a count or an id (`eos_token_id`).
_ANYWHERE = frozenset(
    {
        *("password", "passwd", "pwd", "passphrase", "secret", "secrets"),
        *("credential", "credentials", "creds", "auth", "authorization", "oauth", "bearer"),
        *("cookie", "cookies", "sessionid", "dsn", "pat", "signature", "sig", "jwt", "hmac"),
        *("apikey", "apitoken", "authtoken", "accesstoken", "accesskey", "secretkey"),
        "privatekey",
    }
)
_LAST = frozenset({"token", "key", "keys", "pass", "session"})
# inside a word too: PGPASSWORD, MYSECRET, APIKEY
_INSIDE = ("password", "passwd", "secret", "credential", "apikey", "accesskey", "privatekey")

_REFERENCE = re.compile(r"\$(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")
_ASSIGNED = re.compile(r"-{0,2}[A-Za-z_][\w.-]*")  # the NAME of NAME=value, --opt of --opt=value

# --- free text -----------------------------------------------------------------------------
# A name followed by `=`, `:` (a header, YAML, JSON, a Python repr) or, after an option, a space.
_NAMED = re.compile(
    r"(?<![\w.$-])(?P<name>-{0,2}[A-Za-z_][\w.-]*)(?:\\?[\"']?)(?P<op>\s*[=:]\s*|\s+)"
)
_VALUE = re.compile(
    r"""(?P<scheme>(?i:Bearer|Basic|Token|Digest|Negotiate|Bot)\s+)?  # any case, as HTTP has it
    (?: (?P<ref>\$\{[A-Za-z_]\w*\}|\$[A-Za-z_]\w*)(?![\w{])  # ${NAME}: kept
      | "(?P<dq>(?:[^"\\]|\\.)*)"
      | \\"(?P<escaped>.*?)\\"                # \"value\": JSON inside a shell string
      | '(?P<sq>[^']*)'
      | \[(?P<list>[^\]]*)\]                  # ['value'] in a Python repr
      | (?P<bare>[^\s,;&'"{}\[\])][^\s,;&'"}\])]*) )""",  # a {mapping}: by its own keys
    re.X,
)
_OPTION_VALUE = re.compile(r"\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'|(?P<bare>[^\s'\"-][^\s'\"]*)")
_LINE_VALUE = re.compile(r"(?P<bare>[^\r\n'\"]+)")  # a cookie: every `a=1; b=2` of it
_BEARER = re.compile(r"(?<![\w-])Bearer\s+(?P<v>[^\s'\",;]+)")
_USERINFO = re.compile(r"(?<=://)[^\s/?#@:'\"]*:(?P<pw>[^\s/?#'\"]*)@")  # up to the last @
# `curl -u user:password`, `--user`, `--proxy-user`: the password after the first colon
_USER_OPTIONS = frozenset({"-u", "--user", "--proxy-user"})
_USER_OPTION = re.compile(
    r"(?<![\w-])(?:-u|--user|--proxy-user)(?:\s+|=)['\"]?[^\s:'\"]*:(?P<pw>[^\s'\"]+)"
)
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")
_PEM = re.compile(_PEM_BEGIN.pattern + r"(?P<body>.*?)(?=-----END|\Z)", re.S)
_TOKEN = re.compile(r"[^\s'\"`<>()\[\]{},;=@/?&#\\|]{20,}")  # a candidate for the shapes
# shapes detect-secrets does not know: OpenAI-style and Hugging Face keys, Google API keys
_OWN_SHAPES = (
    r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}",  # long: not a `sk-learn-…` name
    r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}",  # long: not `hf_overrides`
    r"AIza[0-9A-Za-z_-]{35}",
    r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}",
)


@functools.cache
def _shapes() -> re.Pattern[str]:
    """One pattern for every token shape: detect-secrets' detectors that know a value by its
    look alone (those that need a keyword are covered by the names), and kbgen's own."""
    from detect_secrets.plugins import (  # ~0.2 s to import: only once a text needs it
        aws,
        discord,
        github_token,
        gitlab_token,
        jwt,
        mailchimp,
        openai,
        private_key,
        pypi_token,
        sendgrid,
        slack,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )

    detectors: list[Any] = [  # RegexBasedDetector classes, untyped upstream
        aws.AWSKeyDetector,
        discord.DiscordBotTokenDetector,
        github_token.GitHubTokenDetector,
        gitlab_token.GitLabTokenDetector,
        jwt.JwtTokenDetector,
        mailchimp.MailchimpDetector,
        openai.OpenAIDetector,
        private_key.PrivateKeyDetector,
        pypi_token.PypiTokenDetector,
        sendgrid.SendGridDetector,
        slack.SlackDetector,
        square_oauth.SquareOAuthDetector,
        stripe.StripeDetector,
        telegram_token.TelegramBotTokenDetector,
        twilio.TwilioKeyDetector,
    ]
    parts = [_scoped(p) for detector in detectors for p in detector().denylist]
    return re.compile("|".join(parts + [f"(?:{p})" for p in _OWN_SHAPES]))


def _scoped(pattern: re.Pattern[str]) -> str:
    """A detector's pattern as one alternative, its own flags kept to it."""
    flags = "".join(f for f, bit in (("i", re.I), ("x", re.X), ("s", re.S)) if pattern.flags & bit)
    return f"(?{flags}:{pattern.pattern})" if flags else f"(?:{pattern.pattern})"


# --- names ---------------------------------------------------------------------------------


def _words(name: str) -> list[str]:
    """`X-Api-Key` → x, api, key; `apiKey` → api, key; `HFToken` → hf, token."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


@functools.lru_cache(maxsize=8192)  # names repeat: a record's keys, the words of a warning
def is_secret_name(name: str) -> bool:
    """Whether a value called `name` (an option, variable, key or header) is a secret, however
    it is written: `HF_TOKEN`, `hf-token`, `HfToken`, `HFTOKEN` (a last word that ends in a
    token, never `tokens`, a count)."""
    words = _words(name)
    return bool(words) and (
        words[-1] in _LAST
        or words[-1].endswith("token")
        or any(w in _ANYWHERE or any(part in w for part in _INSIDE) for w in words)
    )


def _kept(value: str) -> bool:
    """Values a mask would hide nothing in: empty, masked already, a reference to the env."""
    return not value.strip() or value == MASK or bool(_REFERENCE.fullmatch(value.strip()))


def _masked(value: str) -> str:
    return value if _kept(value) else MASK


# --- free text -----------------------------------------------------------------------------


def text(value: str) -> str:
    """Free text with every secret value in it masked in place: `NAME=value`, `--opt value`,
    `"key": "value"`, `Header: value`, `Bearer value`, URL passwords, PEM bodies, token shapes."""
    if not value:
        return value
    spans = [*_named_spans(value), *_shape_spans(value)]
    for pattern, group in ((_BEARER, "v"), (_USERINFO, "pw"), (_USER_OPTION, "pw"), (_PEM, "body")):
        spans += [m.span(group) for m in pattern.finditer(value) if not _kept(m.group(group))]
    if not spans:
        return value
    out, end = [], len(value)
    for start, stop in _merged(spans)[::-1]:
        out.append(value[stop:end])
        out.append(MASK)
        end = start
    out.append(value[:end])
    return "".join(reversed(out))


def _named_spans(value: str) -> list[tuple[int, int]]:
    spans = []
    for named in _NAMED.finditer(value):
        name, op = named.group("name"), named.group("op")
        if not is_secret_name(name):
            continue
        if op.strip():
            if value.startswith("//", named.end()):  # `auth://host`: a scheme, not a value
                continue
            pattern = _LINE_VALUE if "cookie" in _words(name) else _VALUE
        elif name.startswith("-"):
            pattern = _OPTION_VALUE  # `--api-key value`
        else:
            continue  # prose: "the password is"
        found = pattern.match(value, named.end())
        if found is None:
            continue
        group = next(g for g, v in found.groupdict().items() if v is not None and g != "scheme")
        if not _kept(found.group(group)):
            spans.append(found.span(group))
    return spans


def _shape_spans(value: str) -> list[tuple[int, int]]:
    candidates = [m for m in _TOKEN.finditer(value) if not _kept(m.group())]
    if not candidates:
        return []
    shapes = _shapes()
    return [m.span() for m in candidates if shapes.search(m.group())]


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, stop in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], stop))
        else:
            out.append((start, stop))
    return out


class Lines:
    """A stream's redaction, line by line (a server's output into its log): `text` of each
    line, the body of a private key masked also on the lines after its BEGIN line, and every
    `known` secret (`known`: what the server was given) wherever it appears, however written."""

    def __init__(self, known: frozenset[str] = frozenset()) -> None:
        self.in_key = False
        self.known = sorted(known, key=len, reverse=True)

    def __call__(self, line: str) -> str:
        for secret in self.known:
            line = line.replace(secret, MASK)
        if self.in_key:
            end = line.find("-----END")
            if end < 0:
                return MASK + line[len(line.rstrip("\r\n")) :]
            self.in_key, line = False, MASK + line[end:]
        begins = list(_PEM_BEGIN.finditer(line))
        if begins and "-----END" not in line[begins[-1].end() :]:
            self.in_key = True
        return text(line)


# --- structured ----------------------------------------------------------------------------


def _value(value: str, depth: int = 0) -> str:
    """One value of unknown meaning: JSON is parsed and masked by its keys; the rest is text."""
    if value.lstrip()[:1] in ("{", "[") and depth < 20:
        try:
            tree = json.loads(value)
        except (ValueError, RecursionError):
            pass
        else:
            masked = _data(tree, depth + 1)
            if masked == tree:
                return value
            compact = (",", ":") if ", " not in value and ": " not in value else None
            return json.dumps(masked, ensure_ascii=False, separators=compact)
    return text(value)


def args(argv: list[str]) -> list[str]:
    """A command line with the values of secret options masked, one element for one.

    `--api-key X`, `--api-key=X`, `HF_TOKEN=X` (an environment prefix, a container's `-e`), a
    header (`-H "Authorization: Bearer X"`), JSON (`--kv-transfer-config '{"api_key": X}'`), a
    shell string (`sh -c '… --api-key X'`) and token-shaped values anywhere.
    """
    return _args(argv, 0)


def _args(argv: list[str], depth: int) -> list[str]:
    out: list[str] = []
    value_is_secret = user_follows = False
    for arg in argv:
        if value_is_secret and not arg.startswith("--"):
            out.append(_masked(arg))
            value_is_secret = False
            continue
        if user_follows and ":" in arg:  # `-u user:password`: the user stays
            user, _, password = arg.partition(":")
            out.append(f"{user}:{_masked(password)}")
            user_follows = False
            continue
        value_is_secret = False
        user_follows = arg in _USER_OPTIONS
        name, sep, value = arg.partition("=")
        if sep and _ASSIGNED.fullmatch(name):
            if name in _USER_OPTIONS and ":" in value:  # `--user=user:password`
                user, _, password = value.partition(":")
                out.append(f"{name}={user}:{_masked(password)}")
            elif not is_secret_name(name):
                out.append(f"{name}={_value(value, depth)}")
            elif any(c.isspace() for c in value):  # `HF_TOKEN=x vllm serve …`: a shell string
                out.append(text(arg))
            else:
                out.append(f"{name}={_masked(value)}")
        elif arg.startswith("-") and _ASSIGNED.fullmatch(arg) and is_secret_name(arg):
            out.append(arg)  # `--api-key`; not `-HAuthorization: Bearer X`, masked as text
            value_is_secret = True
        else:
            out.append(_value(arg, depth))
    return out


def known(argv: list[str], variables: Mapping[str, str]) -> frozenset[str]:
    """The secrets a command line and an environment hold as whole values — an option's value,
    a `NAME=value`, a secret variable's value — for `Lines` to find however a server echoes them."""
    found = {v for name, v in variables.items() if is_secret_name(name)}
    for given, shown in zip(argv, args(argv), strict=True):
        if shown == MASK:
            found.add(given)
        elif shown.endswith(f"={MASK}") and given.startswith(name := shown[: -len(MASK)]):
            found.add(given[len(name) :])
    return frozenset(v for v in found if len(v) >= 4 and not _kept(v))  # not "1", not "yes"


def env(variables: Mapping[str, str]) -> dict[str, str]:
    """An environment with the values of secret variables masked, and secrets inside the others."""
    return {
        name: _masked(value) if is_secret_name(name) else _value(value)
        for name, value in variables.items()
    }


def data(tree: Any) -> Any:
    """A JSON-like tree with secrets masked: the value of a secret-named key at any depth, lists
    of strings as command lines, other strings as values. Unchanged parts are the same objects."""
    masked = _data(tree, 0)
    return tree if masked == tree else masked


def found(tree: Any) -> list[list[str | int]]:
    """Where `tree` holds a secret: the key path of every value `data` would mask."""
    return list(_differences(tree, data(tree), []))


def _differences(before: Any, after: Any, at: list[str | int]) -> Any:
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in before:
            yield from _differences(before[key], after.get(key), [*at, key])
    elif isinstance(before, list | tuple) and isinstance(after, list | tuple):
        for i, (one, other) in enumerate(zip(before, after, strict=False)):
            yield from _differences(one, other, [*at, i])
    elif before != after:
        yield at


def _data(tree: Any, depth: int) -> Any:
    if isinstance(tree, str):
        return _value(tree, depth)
    if isinstance(tree, Mapping):
        return {
            key: _all(value, depth) if is_secret_name(str(key)) else _data(value, depth + 1)
            for key, value in tree.items()
        }
    if isinstance(tree, list | tuple):
        if all(isinstance(item, str) for item in tree):
            items = _args(list(tree), depth)
        else:
            items = [_data(item, depth + 1) for item in tree]
        return tuple(items) if isinstance(tree, tuple) else items
    return tree


def _all(value: Any, depth: int) -> Any:
    """The value of a secret-named key: every scalar in it masked. A mapping that names its
    secret (`credentials: {user: bob, password: …}`) is masked by its own keys; one that does
    not (`password: {value: …}`) is masked whole, its keys kept."""
    if isinstance(value, str):
        return _masked(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return MASK
    if isinstance(value, list | tuple):
        return [_all(item, depth) for item in value]
    if isinstance(value, Mapping) and not any(is_secret_name(str(key)) for key in value):
        return {key: _all(item, depth + 1) for key, item in value.items()}
    return _data(value, depth + 1)
