"""Write a small Mooncake-format trace of multi-turn conversations (generated-small.jsonl).

Seeded and short enough for the CPU vLLM: conversations that share a system prompt's block and
grow turn by turn, each turn's blocks its conversation's so far and one of its own, arriving
at a Poisson rate. Usage: python bench/traces/generate.py [OUT] [--requests N] [--rate R]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

BLOCK = 32  # tokens a block: the spec's `trace.block_tokens`


def generate(requests: int, rate: float, seed: int = 0) -> list[dict[str, object]]:
    draw = random.Random(seed)
    conversations: list[list[int]] = []  # each conversation's blocks so far
    next_block, now, rows = 1, 0.0, []
    for _ in range(requests):
        if not conversations or draw.random() < 0.3:  # a new conversation, after the system block
            conversations.append([0])
        blocks = conversations[draw.randrange(len(conversations))]
        blocks.append(next_block)
        next_block += 1
        tail = draw.randint(1, BLOCK)  # the last block partly filled
        rows.append(
            {
                "timestamp": round(now * 1000),
                "input_length": (len(blocks) - 1) * BLOCK + tail,
                "output_length": draw.randint(8, 24),
                "hash_ids": list(blocks),
            }
        )
        now += draw.expovariate(rate)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = Path(__file__).parent
    parser.add_argument("out", type=Path, nargs="?", default=here / "generated-small.jsonl")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--rate", type=float, default=2.0)
    a = parser.parse_args()
    rows = generate(a.requests, a.rate)
    a.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{a.out}: {len(rows)} requests over {rows[-1]['timestamp']} ms")


if __name__ == "__main__":
    main()
