#!/usr/bin/env python3
"""Training prompts for the EAGLE-3 draft: seeded variations in the benchmark's four classes.

Usage: python3 bench/gpu/eagle3/prompts.py OUT.jsonl [--count 2400] [--seed 20261203]

No model hub or dataset is reachable from the GPU machine, so the prompts are made here from
templates (coding, math, explanatory, code-edit), each line {"class", "prompt"} as a kbgen
prompt suite. None is one of the benchmark's prompts (bench/prompts/): the script refuses to
write a suite that shares one with them, so the draft is never trained on what it is judged on.
"""

# ruff: noqa: E501 -- the templates read best one to a line
from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "prompts"

TASKS = [
    ("reverses the words of a sentence", "reverse_words(s: str) -> str"),
    ("counts the vowels in a string", "count_vowels(s: str) -> int"),
    ("returns the n-th Fibonacci number iteratively", "fib(n: int) -> int"),
    (
        "merges two sorted lists into one sorted list",
        "merge(a: list[int], b: list[int]) -> list[int]",
    ),
    ("checks whether a number is prime", "is_prime(n: int) -> bool"),
    ("flattens a nested list of integers", "flatten(xs: list) -> list[int]"),
    (
        "groups words by their first letter",
        "group_by_initial(words: list[str]) -> dict[str, list[str]]",
    ),
    ("removes duplicates from a list while keeping the order", "dedupe(xs: list) -> list"),
    ("computes the median of a list of numbers", "median(xs: list[float]) -> float"),
    (
        "parses a date in YYYY-MM-DD form into a tuple of ints",
        "parse_date(s: str) -> tuple[int, int, int]",
    ),
    ("rotates a list to the right by k places", "rotate(xs: list, k: int) -> list"),
    ("returns the most frequent character of a string", "most_common_char(s: str) -> str"),
    ("converts a Roman numeral to an integer", "roman_to_int(s: str) -> int"),
    ("checks whether brackets in a string are balanced", "balanced(s: str) -> bool"),
    ("computes the greatest common divisor of two integers", "gcd(a: int, b: int) -> int"),
    (
        "transposes a matrix given as a list of rows",
        "transpose(m: list[list[int]]) -> list[list[int]]",
    ),
    (
        "finds the longest common prefix of a list of strings",
        "common_prefix(words: list[str]) -> str",
    ),
    ("splits a list into chunks of size n", "chunks(xs: list, n: int) -> list[list]"),
    ("counts the words in a text file", "word_count(path: str) -> int"),
    ("validates an email address with a simple rule", "valid_email(s: str) -> bool"),
]
LANGUAGES = ["Python", "Python", "Python", "JavaScript", "Go", "Rust", "Java", "C"]
EXTRAS = [
    "with a docstring and two examples",
    "and explain its time complexity",
    "then write three unit tests for it",
    "handling empty input gracefully",
    "with comments on each step",
    "and show how to call it",
]

SNIPPETS = [
    "def area(w, h):\n    return w * h\n",
    "def greet(name):\n    print('Hello, ' + name + '!')\n",
    "def evens(xs):\n    out = []\n    for x in xs:\n        if x % 2 == 0:\n            out.append(x)\n    return out\n",
    "def mean(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s / len(xs)\n",
    "def find(xs, target):\n    for i in range(len(xs)):\n        if xs[i] == target:\n            return i\n    return None\n",
    "def load(path):\n    f = open(path)\n    data = f.read()\n    f.close()\n    return data\n",
    "def squares(n):\n    result = []\n    for i in range(n):\n        result.append(i * i)\n    return result\n",
    "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n",
    "class Counter:\n    def __init__(self):\n        self.n = 0\n    def inc(self):\n        self.n = self.n + 1\n        return self.n\n",
    "def join_names(names):\n    s = ''\n    for n in names:\n        s = s + n + ', '\n    return s[:-2]\n",
    "def max_of(xs):\n    m = xs[0]\n    for x in xs:\n        if x > m:\n            m = x\n    return m\n",
    "def to_upper(words):\n    return list(map(lambda w: w.upper(), words))\n",
]
EDITS = [
    "Add type hints to every parameter and return value",
    "Rename every variable to a descriptive name",
    "Add a docstring that describes the arguments and the result",
    "Rewrite it with a list comprehension or a built-in where one fits",
    "Make it raise ValueError on empty input",
    "Add logging of its arguments at debug level",
    "Rewrite it in JavaScript, keeping the same structure",
    "Use a with statement or another idiom that is safer",
    "Split it into two smaller functions",
    "Make every name follow PEP 8 and add a short comment per block",
]
EDIT_TAILS = [
    "Return the whole edited code.",
    "Show the full edited code, then list what changed.",
    "Give the complete new version of the code.",
    "Reply with the edited code only.",
    "Show the edited code and one example call.",
    "Write the edited code in a fenced block, then explain the edit in one sentence.",
]

TOPICS = [
    "how a compiler turns source code into machine code",
    "why the seasons change",
    "how vaccines train the immune system",
    "what a database index is and when it helps",
    "how public-key cryptography works",
    "why ice floats on water",
    "how a neural network learns from examples",
    "what inflation is and what causes it",
    "how TCP makes delivery reliable",
    "why leaves change colour in autumn",
    "how garbage collection works in a language runtime",
    "what photosynthesis produces",
    "how GPS finds a position",
    "why the Moon shows phases",
    "how a hash function is used",
    "what an operating system scheduler does",
    "how caching speeds up a web page",
    "why some metals conduct electricity",
    "how a bill becomes a law in a parliament",
    "how recursion works in programming",
    "what causes ocean tides",
    "how DNS turns a name into an address",
    "why airplanes can fly",
    "what a version control system is for",
    "how rainbows form",
]
AUDIENCES = [
    "to a new programmer",
    "to a ten-year-old",
    "in three short paragraphs",
    "with one everyday analogy",
    "to a university student",
    "in plain words, in under 200 words",
    "step by step",
    "with a short example",
    "to someone who has never heard of it",
    "and give one common misconception",
    "as a list of key points",
    "in one paragraph",
]


def coding(rng: random.Random) -> str:
    what, signature = rng.choice(TASKS)
    language = rng.choice(LANGUAGES)
    if language == "Python":
        return f"Write a Python function `{signature}` that {what}, {rng.choice(EXTRAS)}."
    return f"Write a {language} function that {what}, {rng.choice(EXTRAS)}."


def math(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 97), rng.randint(2, 97), rng.randint(2, 12)
    forms = [
        f"A shop sells pens at {a} cents each and notebooks at {b} cents each. How much do "
        f"{c} pens and {c + 1} notebooks cost? Show your steps.",
        f"Solve for x: {c}x + {a} = {b}. Show each step.",
        f"A car travels {a * 3} km in {c} hours. What is its average speed, and how far does it "
        f"go in {c + 2} hours at that speed?",
        f"What is {a}% of {b * 10}? Explain the method you use.",
        f"A rectangle is {a} cm by {b} cm. What are its area and its perimeter?",
        f"What is the sum of the integers from 1 to {a * 10}? Explain the method you use.",
        f"A tank holds {a * 10} litres and drains at {c} litres a minute. How long until it is "
        "empty? Show your steps.",
        f"Find the least common multiple of {a} and {b}, showing the prime factors.",
    ]
    return rng.choice(forms)


def explanatory(rng: random.Random) -> str:
    verb = rng.choice(["Explain", "Describe", "Give an overview of"])
    return f"{verb} {rng.choice(TOPICS)} {rng.choice(AUDIENCES)}."


def code_edit(rng: random.Random) -> str:
    return (
        f"Here is some code:\n\n{rng.choice(SNIPPETS)}\n{rng.choice(EDITS)}. "
        f"{rng.choice(EDIT_TAILS)}"
    )


CLASSES: dict[str, Callable[[random.Random], str]] = {
    "coding": coding,
    "math": math,
    "explanatory": explanatory,
    "code-edit": code_edit,
}


def suite(count: int, seed: int) -> list[dict[str, str]]:
    """`count` distinct prompts, as even over the classes as `count` allows, in a seeded order."""
    rng = random.Random(seed)
    held = {json.loads(line)["prompt"] for f in BENCH.glob("*.jsonl") for line in f.open()}
    seen: set[str] = set()
    out: list[dict[str, str]] = []
    names = list(CLASSES)
    tries = 0
    while len(out) < count:
        tries += 1
        if tries > count * 50:
            raise SystemExit(f"prompts.py: only {len(out)} distinct prompts; ask for fewer")
        name = names[len(out) % len(names)]
        prompt = CLASSES[name](rng)
        if prompt in seen or prompt in held:
            continue
        seen.add(prompt)
        out.append({"class": name, "prompt": prompt})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=2400)
    parser.add_argument("--seed", type=int, default=20261203)
    args = parser.parse_args()
    rows = suite(args.count, args.seed)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"prompts.py: {len(rows)} prompts in {len(CLASSES)} classes -> {args.out}")


if __name__ == "__main__":
    main()
