"""A corpus of secrets in the forms a spec can carry them, each with what kbgen must keep of it.

Every secret is a value found nowhere else (`S3cr3t-0001-…`, or a token of a known shape with its
number inside), so a test can look for it in any file or message. `FORMS` are command-line
arguments and environment variables holding secrets — by name, by shape, in URLs, headers, JSON
and shell strings — with their exact redaction: the names stay and nothing else moves.
`KEPT` are look-alikes that must come through untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbgen.redact import MASK


def s(n: int) -> str:
    """The n-th secret of the corpus: distinctive, and of no known shape."""
    return f"S3cr3t-{n:04d}-qZ7x"


@dataclass(frozen=True)
class Form:
    id: str
    given: list[str] | dict[str, str]  # command-line arguments, or environment variables
    expected: list[str] | dict[str, str]
    secrets: tuple[str, ...]


def _args(id: str, given: list[str], expected: list[str], *secrets: str) -> Form:
    return Form(id, given, expected, secrets or (s(int(id[:2])),))


def _env(id: str, name: str, value: str, expected: str, *secrets: str) -> Form:
    return Form(id, {name: value}, {name: expected}, secrets or (s(int(id[:2])),))


GHP = "ghp_S3cr3t0031aaaabbbbccccddddeeeeffffgg"  # GitHub's shape: ghp_ and 36 characters
GHP_2 = "ghp_S3cr3t0048aaaabbbbccccddddeeeeffffgg"
AKIA = "AKIAS3CR3T0032ABCDEF"  # an AWS access key id
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJTM2NyM3QtMDAzMyJ9.S3cr3t0033sig"
XOXB = "xoxb-1234567890-0034-S3cr3t0034slack"
SK = "sk-S3cr3t0035abcdefghijkl"
HF = "hf_S3cr3t0036abcdefghijklmnopqrstuvwx"
STRIPE = "sk_live_S3cr3t0037abcdefghijklmn"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAS3cr3t0038BodyLine1\n"
    "S3cr3t0038BodyLine2+/=\n"
    "-----END RSA PRIVATE KEY-----"
)
PEM_MASKED = f"-----BEGIN RSA PRIVATE KEY-----{MASK}-----END RSA PRIVATE KEY-----"

FORMS: list[Form] = [
    # --- environment variables, by name
    _env("01-HF_TOKEN", "HF_TOKEN", s(1), MASK),
    _env("02-HUB_TOKEN", "HUGGING_FACE_HUB_TOKEN", s(2), MASK),
    _env("03-OPENAI_API_KEY", "OPENAI_API_KEY", s(3), MASK),
    _env("04-AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", s(4), MASK),
    _env("05-ACCESS_KEY", "ACCESS_KEY", s(5), MASK),
    _env("06-GITHUB_PAT", "GITHUB_PAT", s(6), MASK),
    _env("07-PGPASSWORD", "PGPASSWORD", s(7), MASK),
    _env("08-MYSQL_PWD", "MYSQL_PWD", s(8), MASK),
    _env("09-SENTRY_DSN", "SENTRY_DSN", f"https://{s(9)}@o1.ingest.example/1", MASK),
    _env(
        "10-DATABASE_URL",
        "DATABASE_URL",
        f"postgres://app:{s(10)}@db.internal:5432/app",
        f"postgres://app:{MASK}@db.internal:5432/app",
    ),
    _env("11-SESSION_SECRET", "SESSION_SECRET", s(11), MASK),
    _env("12-REDISCLI_AUTH", "REDISCLI_AUTH", s(12), MASK),
    _env("13-REGISTRY_CREDENTIALS", "REGISTRY_CREDENTIALS", f"robot:{s(13)}", MASK),
    _env("14-PRIVATE_KEY", "SERVER_PRIVATE_KEY", PEM, MASK, "S3cr3t0038"),
    # --- environment variables, by the shape of the value
    _env("15-bearer-value", "EXTRA_HEADER", f"Bearer {s(15)}", f"Bearer {MASK}"),
    _env("16-github-shape", "MIRROR_CONFIG", GHP, MASK, GHP),
    _env("17-jwt-shape", "ID_CLAIMS", JWT, MASK, JWT),
    _env("18-aws-key-id", "AWS_ACCESS_KEY_ID", AKIA, MASK, AKIA),
    # --- options, by name
    _args("19-api-key", ["--api-key", s(19)], ["--api-key", MASK]),
    _args("20-api-key=", [f"--api-key={s(20)}"], [f"--api-key={MASK}"]),
    _args("21-hf-token", ["--hf-token", s(21)], ["--hf-token", MASK]),
    _args("22-token", ["--token", s(22)], ["--token", MASK]),
    _args("23-password", ["--password", s(23)], ["--password", MASK]),
    _args("24-pwd", ["--pwd", s(24)], ["--pwd", MASK]),
    _args("25-auth", ["--auth", s(25)], ["--auth", MASK]),
    _args("26-access-key", ["--access-key", s(26)], ["--access-key", MASK]),
    _args("27-cookie", ["--cookie", f"sid={s(27)}"], ["--cookie", MASK]),
    _args("28-client-secret=", [f"--client-secret={s(28)}"], [f"--client-secret={MASK}"]),
    _args("29-credentials", ["--credentials", s(29)], ["--credentials", MASK]),
    _args("30-ssl-password", ["--ssl-keyfile-password", s(30)], ["--ssl-keyfile-password", MASK]),
    # --- headers
    _args(
        "31-authorization-header",
        ["-H", f"Authorization: Bearer {s(31)}"],
        ["-H", f"Authorization: Bearer {MASK}"],
    ),
    _args("32-x-api-key-header", ["-H", f"X-Api-Key: {s(32)}"], ["-H", f"X-Api-Key: {MASK}"]),
    _args(
        "33-cookie-header",
        ["--header", f"Cookie: sid={s(33)}; theme=dark"],
        ["--header", f"Cookie: {MASK}"],
    ),
    _args(
        "34-proxy-authorization",
        ["--header", f"Proxy-Authorization: Basic {s(34)}"],
        ["--header", f"Proxy-Authorization: Basic {MASK}"],
    ),
    # --- URLs
    _args(
        "35-url-userinfo",
        ["--api-base", f"http://user:{s(35)}@10.0.0.7:8000/v1"],
        ["--api-base", f"http://user:{MASK}@10.0.0.7:8000/v1"],
    ),
    _args(
        "36-database-url",
        ["--db", f"postgres://app:{s(36)}@db.internal:5432/app"],
        ["--db", f"postgres://app:{MASK}@db.internal:5432/app"],
    ),
    _args(
        "37-url-query-token",
        ["--callback", f"https://hooks.example/p?token={s(37)}&x=1"],
        ["--callback", f"https://hooks.example/p?token={MASK}&x=1"],
    ),
    # --- JSON arguments
    _args(
        "38-json-nested-api-key",
        [
            "--kv-transfer-config",
            f'{{"kv_connector": "LMCache", "extra": {{"api_key": "{s(38)}"}}}}',
        ],
        [
            "--kv-transfer-config",
            f'{{"kv_connector": "LMCache", "extra": {{"api_key": "{MASK}"}}}}',
        ],
    ),
    _args(
        "39-json-opt=value-keeps-the-next-argument",  # the bug: the mask moved onto the next one
        [
            f'--kv-transfer-config={{"auth":{{"password":"{s(39)}"}}}}',
            "--tensor-parallel-size",
            "8",
        ],
        [f'--kv-transfer-config={{"auth":{{"password":"{MASK}"}}}}', "--tensor-parallel-size", "8"],
    ),
    _args(
        "40-json-list-of-headers",
        ["--hf-overrides", f'{{"headers": [{{"name": "x", "token": "{s(40)}"}}]}}'],
        ["--hf-overrides", f'{{"headers": [{{"name": "x", "token": "{MASK}"}}]}}'],
    ),
    # --- shell strings
    _args(
        "41-sh-c",
        ["sh", "-c", f"HF_TOKEN={s(41)} vllm serve m --api-key {s(42)} --port 8000"],
        ["sh", "-c", f"HF_TOKEN={MASK} vllm serve m --api-key {MASK} --port 8000"],
        s(41),
        s(42),
    ),
    _args(
        "43-sh-c-curl",
        ["sh", "-c", f"curl -H 'Authorization: Bearer {s(43)}' http://u:{s(44)}@h/v1/models"],
        ["sh", "-c", f"curl -H 'Authorization: Bearer {MASK}' http://u:{MASK}@h/v1/models"],
        s(43),
        s(44),
    ),
    _args(
        "45-sh-c-json",
        ["sh", "-c", f'vllm serve --kv-transfer-config \'{{"api_key": "{s(45)}"}}\''],
        ["sh", "-c", f'vllm serve --kv-transfer-config \'{{"api_key": "{MASK}"}}\''],
    ),
    # --- assignments: an environment prefix, a container's -e
    _args("46-env-prefix", [f"OPENAI_API_KEY={s(46)}", "vllm"], [f"OPENAI_API_KEY={MASK}", "vllm"]),
    _args("47-docker-e", ["-e", f"HF_TOKEN={s(47)}"], ["-e", f"HF_TOKEN={MASK}"]),
    # --- options, by the shape of the value
    _args("48-github-shape", ["--mirror", GHP_2], ["--mirror", MASK], GHP_2),
    _args("49-slack-shape", ["--notify", XOXB], ["--notify", MASK], XOXB),
    _args("50-sk-shape", ["--fallback", SK], ["--fallback", MASK], SK),
    _args("51-hf-shape", [HF], [MASK], HF),
    _args("52-stripe-shape", [f"--billing={STRIPE}"], [f"--billing={MASK}"], STRIPE),
    _args("53-bearer-bare", ["-H", f"Bearer {s(53)}"], ["-H", f"Bearer {MASK}"]),
    # --- headers as curl takes them: any case of the scheme, the option joined to its value
    _args(
        "54-lowercase-bearer",
        ["-H", f"authorization: bearer {s(54)}"],
        ["-H", f"authorization: bearer {MASK}"],
    ),
    _args(
        "55-token-scheme",
        ["-H", f"Authorization: token {s(55)}"],
        ["-H", f"Authorization: token {MASK}"],
    ),
    _args(
        "56-joined-header-option",
        [f"-HAuthorization: Bearer {s(56)}", "--tensor-parallel-size", "8"],
        [f"-HAuthorization: Bearer {MASK}", "--tensor-parallel-size", "8"],
    ),
]

# Arguments and variables that look like secrets but are not: they must come through untouched.
KEPT_ARGS: list[list[str]] = [
    ["--max-num-batched-tokens", "512"],
    ["--max-num-batched-tokens=512"],
    ["--tokenizer", "x"],
    ["--tokenizer-mode", "auto"],
    ["--tensor-parallel-size", "8"],
    ["--port", "8000"],
    ["--max-model-len", "2048"],
    ["--long-prefill-token-threshold", "1000"],
    ["--return-tokens-as-token-ids", "--kv-cache-dtype", "fp8"],
    ["--served-model-name", "tiny"],
    ["--enable-auto-tool-choice"],
    ["/models/Llama-3.1-8B-Instruct"],
    ["meta-llama/Llama-3.1-8B-Instruct"],
    ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 5}'],
    ["--hf-overrides", '{"eos_token_id": 2, "pad_token_id": 0}'],
    ["--compilation-config", '{"pass_config": {"enable_fusion": true}}'],
    ["--api-base", "http://127.0.0.1:8000/v1"],
    ["--repo", "git@github.com:org/repo.git"],
    ["--revision", "0123456789abcdef0123456789abcdef01234567"],  # a git sha is no secret
    ["serve", "sk-short"],
    ["--hf-overrides", '{"architectures": ["LlamaForCausalLM"]}', "hf_overrides_and_more"],
    ["--api-key", "${VLLM_API_KEY}"],  # a reference to the environment is kept
    ["--api-key=$VLLM_API_KEY"],
    ["-H", "Authorization: Bearer ${TOKEN}"],
]
KEPT_ENV: dict[str, str] = {
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_CPU_KVCACHE_SPACE": "4",
    "MAX_TOKENS": "64",
    "PATH": "/usr/local/bin:/usr/bin",
    "HF_HOME": "/models/hf",
    "VLLM_API_KEY": "${VLLM_API_KEY}",  # a reference to the environment is kept
    "CUDA_VISIBLE_DEVICES": "0,1",
}


def env_forms() -> list[Form]:
    return [f for f in FORMS if isinstance(f.given, dict)]


def args_forms() -> list[Form]:
    return [f for f in FORMS if isinstance(f.given, list)]


def every_secret() -> list[str]:
    return [secret for form in FORMS for secret in form.secrets]
