"""Shared prefixes by design: the words a prefix is cut from, and which one each prompt draws.

Pure and seeded: a prompt draws its prefix from the seed, its class and its index, never the
arm, round or repeat, so every arm sends each prompt with the same prefix. `bench.bodies` cuts
the words to the token with the served model's tokenizer.
"""

from __future__ import annotations

import random

from kbgen.kb.models import Prefixes

# Plain words, so a prefix reads as text and every tokenizer splits it into a few tokens a word
_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when if so "
    "no will more some time these two may first then do any like my now over such our man me "
    "even most made after also did many before must through back years where much your way "
    "well down should because each just those people how too little state good very make "
    "world still own see men work long get here between both life being under never day same "
    "another know while last might us great old year off come since against go came right "
    "used take three house system program number water place small large point answer "
    "question method result"
)
WORDS = tuple(_TEXT.split())


def words(prefixes: Prefixes, index: int, count: int) -> str:
    """`count` words of prefix `index`: the text its tokens are cut from."""
    draw = random.Random(f"prefix:{prefixes.seed}:{index}")
    return " ".join(draw.choice(WORDS) for _ in range(count))


def drawn(prefixes: Prefixes, prompt_class: str, prompt_index: int) -> int:
    """The prefix a prompt is sent with, whatever the arm, round or repeat."""
    return random.Random(f"draw:{prefixes.seed}:{prompt_class}:{prompt_index}").randrange(
        prefixes.count
    )


def shared(a: list[int], b: list[int]) -> int:
    """How many tokens two token lists begin with alike."""
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
