"""Shared prefixes by design: seeded words, a prompt's prefix drawn alike on every arm, and the
tokens two token lists share."""

from __future__ import annotations

import collections

from hypothesis import given
from hypothesis import strategies as st

from kbgen.kb.models import Prefixes
from kbgen.run import prefixes


def test_a_prefix_s_words_are_its_seed_s_and_differ_between_prefixes() -> None:
    design = Prefixes(count=3, tokens=64, seed=7)
    assert prefixes.words(design, 0, 50) == prefixes.words(design, 0, 50)
    assert prefixes.words(design, 0, 50) != prefixes.words(design, 1, 50)
    assert prefixes.words(design, 0, 20) == " ".join(prefixes.words(design, 0, 50).split()[:20])
    other = design.model_copy(update={"seed": 8})
    assert prefixes.words(other, 0, 50) != prefixes.words(design, 0, 50)


def test_prompts_draw_every_prefix_about_evenly() -> None:
    design = Prefixes(count=4, tokens=64, seed=0)
    counts = collections.Counter(prefixes.drawn(design, "coding", i) for i in range(4000))
    assert set(counts) == {0, 1, 2, 3}
    assert all(900 < n < 1100 for n in counts.values())


@given(st.lists(st.integers(0, 5)), st.lists(st.integers(0, 5)))
def test_shared_is_the_common_beginning(a: list[int], b: list[int]) -> None:
    n = prefixes.shared(a, b)
    assert a[:n] == b[:n]
    assert n == min(len(a), len(b)) or a[n] != b[n]
