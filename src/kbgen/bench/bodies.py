"""What a run sends: each request's body, and the shared prefixes built for it on the server.

A prefix is cut from seeded words (`run.prefixes.words`) at `tokens` tokens by the server's
`/tokenize`, made text again by its `/detokenize`; what every request drawing it shares (the
chat template's opening, the prefix) is measured the same way.
"""

from __future__ import annotations

from typing import Any

from kbgen.bench import metrics
from kbgen.bench.client import Client
from kbgen.errors import ServerFailed, ServerUnreachable
from kbgen.kb.models import Api, Prefixes
from kbgen.run import prefixes as design
from kbgen.run import traffic
from kbgen.run.models import PrefixTexts
from kbgen.run.spec import WorkloadSpec


def payload(
    workload: WorkloadSpec,
    model: str,
    prompt: str,
    prefix: str | None = None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """The body of one request: the workload's settings, the prompt, a shared prefix before it,
    its own `max_tokens` where it has one (drawn lengths, a trace)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens or workload.max_tokens,
        "temperature": workload.temperature,
        "ignore_eos": workload.ignore_eos,
    }
    if workload.seed is not None:
        body["seed"] = workload.seed
    if workload.api == "chat":
        body["messages"] = messages(prefix, prompt)
    else:
        body["prompt"] = prefixed(prefix, prompt)
    return body


async def build(client: Client, model: str, prefixes: Prefixes, api: Api) -> PrefixTexts:
    """The run's prefix texts, their lengths and the tokens a request with each shares; a
    server without vLLM's `/tokenize` and `/detokenize` is a ServerFailed that says so."""
    try:
        return await _build(client, model, prefixes, api)
    except (ServerUnreachable, KeyError, TypeError, ValueError) as exc:
        raise ServerFailed(
            "workload.prefixes cuts its texts with the server's own tokenizer, through vLLM's "
            f"/tokenize and /detokenize, which answered otherwise: {exc}"
        ) from exc


async def _build(client: Client, model: str, prefixes: Prefixes, api: Api) -> PrefixTexts:
    texts, lengths, shared = [], [], []
    for index in range(prefixes.count):
        count = prefixes.tokens
        while len(ids := await _tokens(client, model, design.words(prefixes, index, count))) < (
            prefixes.tokens
        ):
            count *= 2
        cut = {"model": model, "tokens": ids[: prefixes.tokens]}
        text = str((await client.post_json("/detokenize", cut))["prompt"])
        texts.append(text)
        lengths.append(len(await _tokens(client, model, text)))
        one = await _request_tokens(client, model, api, text, "a")
        shared.append(design.shared(one, await _request_tokens(client, model, api, text, "b")))
    block = metrics.block_size(metrics.parse(await client.metrics_text()))
    return PrefixTexts(shared_tokens=shared, block_size=block, texts=texts, tokens=lengths)


async def word_tokens(client: Client, model: str, api: Api) -> tuple[dict[str, int], int]:
    """How many of the served model's tokens each word prompts are built from is
    (`run.traffic.word_list`), and how many a request adds to its prompt's (special tokens,
    the chat template); a server without vLLM's `/tokenize` is a ServerFailed."""
    try:
        counts = {w: len(await _tokens(client, model, w)) for w in traffic.word_list()}
        one = next((w for w, n in counts.items() if n == 1), None)
        if one is None:
            raise ValueError("no word of kbgen's list is one token of the served model")
        return counts, len(await _request_tokens(client, model, api, None, one)) - 1
    except (ServerUnreachable, KeyError, TypeError, ValueError) as exc:
        raise ServerFailed(
            "synthetic and trace prompts are built with the server's own tokenizer, through "
            f"vLLM's /tokenize, which answered otherwise: {exc}"
        ) from exc


def drawn(
    prefixes: Prefixes | None, texts: PrefixTexts | None, prompt_class: str, prompt_index: int
) -> tuple[int | None, str | None]:
    """The shared prefix a prompt is sent with: its index and text (None, None: none)."""
    if prefixes is None or texts is None:
        return None, None
    index = design.drawn(prefixes, prompt_class, prompt_index)
    return index, texts.texts[index]


async def _tokens(client: Client, model: str, text: str) -> list[int]:
    said = await client.post_json(
        "/tokenize", {"model": model, "prompt": text, "add_special_tokens": False}
    )
    return [int(t) for t in said["tokens"]]


async def _request_tokens(
    client: Client, model: str, api: Api, prefix: str | None, prompt: str
) -> list[int]:
    """The tokens the server reads for a request of `prompt` after `prefix`, as the run sends it."""
    body: dict[str, Any] = {"model": model}
    if api == "chat":
        body |= {"messages": messages(prefix, prompt), "add_generation_prompt": True}
    else:
        body |= {"prompt": prefixed(prefix, prompt)}
    return [int(t) for t in (await client.post_json("/tokenize", body))["tokens"]]


def messages(prefix: str | None, prompt: str) -> list[dict[str, str]]:
    """A chat request's messages: the prefix as its system message."""
    head = [] if prefix is None else [{"role": "system", "content": prefix}]
    return [*head, {"role": "user", "content": prompt}]


def prefixed(prefix: str | None, prompt: str) -> str:
    """A completion's prompt with the prefix before it."""
    return prompt if prefix is None else f"{prefix}\n\n{prompt}"
