"""Which requests of two variants sent the same prompt, by what the files prove.

`Sample.prompt_index` is the key the verdict pairs arms by: the same index in two variants means
the same prompt only when the files prove it — equal prompt texts (GuideLLM), or equal input
lengths at every position of every file (`vllm bench serve`, whose result file keeps no texts).
Otherwise every request of every file gets an index of its own, and the note says so.
"""

from __future__ import annotations

from kbgen.record.importers.imported import Imported


def pair_prompts(found: list[Imported]) -> tuple[bool, str]:
    """Set every sample's prompt_index (and repeat) by what the files prove; whether the arms
    are paired by prompt, and how, as a note. Unproven, each file's requests get indices of
    their own, after the previous file's: nothing is paired."""
    kinds = {i.prompt_evidence for i in found}
    evidence = kinds.pop() if len(kinds) == 1 else None
    keyed = all(len(i.prompt_keys) == len(i.samples) and None not in i.prompt_keys for i in found)
    reason = ""
    if evidence is None or not keyed:
        reason = "the files do not all say which prompt each request sent"
    elif evidence == "prompt text":
        index: dict[str | None, int] = {}
        for imported in found:
            seen: dict[int, int] = {}
            for sample, key in zip(imported.samples, imported.prompt_keys, strict=True):
                sample.prompt_index = index.setdefault(key, len(index))
                sample.repeat = seen.get(sample.prompt_index, 0)
                seen[sample.prompt_index] = sample.repeat + 1
        sent: dict[str, set[int]] = {}  # a variant's prompts, at every step of a sweep
        for imported in found:
            sent.setdefault(imported.variant, set()).update(
                s.prompt_index for s in imported.samples
            )
        common = set.intersection(*sent.values())
        return True, (
            f"requests paired by prompt text: {len(common)} prompt(s) sent to every variant, "
            f"of {len(index)}"
        )
    elif all(i.prompt_keys == found[0].prompt_keys for i in found):
        return True, (
            f"requests paired by position: the files keep no prompt texts, and each of the "
            f"{len(found[0].samples)} positions has the same {evidence} in every file"
        )
    else:
        reason = f"the {evidence} differs between the files"
    offset = 0
    for imported in found:
        for i, sample in enumerate(imported.samples):
            sample.prompt_index, sample.repeat = offset + i, 0
        offset += len(imported.samples)
    return False, (
        f"requests not paired by prompt ({reason}): the verdict compares requests, unpaired"
    )
