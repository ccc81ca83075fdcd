"""Differences between the arms that their own arguments do not explain: caveats on the verdict.

A difference in what the servers logged is explained only by a setting an arm sets itself;
anything else measures more than the arms' arguments (docs/design.md, "Confounds").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kbgen.bench.effective import explains_behaviour
from kbgen.kb.models import EffectiveSettings, Variant
from kbgen.run.counters import Counters

NOT_LOGGED = "not logged"
# a logged setting, and the arguments that set it besides its own name
_SET_BY: dict[str, frozenset[str]] = {
    "max_seq_len": frozenset({"max_model_len"}),
    "device_config": frozenset({"device"}),
    "compilation_config.mode": frozenset(
        {"compilation_config", "optimization_level", "enforce_eager"}
    ),
    "compilation_config.cudagraph_mode": frozenset(
        {"compilation_config", "optimization_level", "enforce_eager"}
    ),
}
_SHORT_FLAGS = {"O": "optimization_level", "cc": "compilation_config"}


def _flag(arg: str) -> str | None:
    """The setting an argument names: `--no-enable-prefix-caching` → `enable_prefix_caching`."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return None
    name = arg.lstrip("-").split("=", 1)[0]
    if arg.startswith("-O") and not arg.startswith("--"):
        return "optimization_level"
    name = _SHORT_FLAGS.get(name.split(".", 1)[0], name)
    if name.startswith("no-"):
        name = name[3:]
    return name.replace("-", "_")


def given(variant: Variant) -> set[str]:
    """The settings an arm's own arguments set."""
    names = {name for name in map(_flag, variant.args) if name}
    if variant.speculative_config is not None:
        names.add("speculative_config")
    return names


def caveats(
    baseline: str, variants: Mapping[str, Variant], effective: Mapping[str, EffectiveSettings]
) -> list[str]:
    """One caveat per setting in which a variant's server differs from the baseline's without
    the arms' arguments setting it, and per behaviour-changing warning only one of them gave.
    Nothing where the baseline's server logged nothing."""
    base = effective.get(baseline)
    if base is None:
        return []
    out: list[str] = []
    for name, mine in effective.items():
        if name == baseline or name not in variants:
            continue
        explained = given(variants[baseline]) | given(variants[name])
        explained |= {k for k in {*base.args, *mine.args} if base.args.get(k) != mine.args.get(k)}
        for section in ("config", "behaviour"):
            theirs, ours = getattr(base, section), getattr(mine, section)
            for key in dict.fromkeys([*theirs, *ours]):
                if theirs.get(key) == ours.get(key):
                    continue
                if ({key} | _SET_BY.get(key, frozenset())) & explained:
                    continue
                out.append(
                    f"the servers ran differently beyond the arms' arguments: {key} "
                    f"{ours.get(key, NOT_LOGGED)} for {name}, {theirs.get(key, NOT_LOGGED)} for "
                    f"{baseline} (from their logs); the effect measures this too"
                )
        for one, other, who in ((mine, base, name), (base, mine, baseline)):
            for warning in one.warnings:
                if warning in other.warnings or explains_behaviour(warning) is not None:
                    continue
                if not _names_any(warning, explained):  # not the answer to an arm's own setting
                    out.append(f"only {who}'s server warned: {warning}")
    return out


def _names_any(warning: str, settings: set[str]) -> bool:
    """Whether a warning names one of `settings` (`Enforce eager set, …` names enforce_eager)."""
    words = " " + " ".join(warning.lower().replace("-", " ").replace("_", " ").split()) + " "
    return any(f" {name.replace('_', ' ')} " in words for name in settings)


def drafting(
    variants: Mapping[str, Variant], windows: Mapping[str, Sequence[Counters]]
) -> list[str]:
    """Why the arms' servers are not the arms' settings, from what their `/metrics` counted:
    an arm that speculates nothing whose server drafted (another arm's server measured in its
    place, as an `external` launcher pointed at one server for both arms does)."""
    out = []
    for name, variant in variants.items():
        drafted = [w.spec_decode for w in windows.get(name, []) if w.spec_decode is not None]
        tokens = sum(d.draft_tokens for d in drafted)
        if variant.speculative_config is None and tokens:
            accepted = sum(d.accepted_tokens for d in drafted) / tokens
            out.append(
                f"{name}: its server drafted {tokens:.0f} tokens (acceptance {accepted:.2f}) "
                "though its settings speculate nothing: it is not the server of its settings "
                "(another arm's measured in its place?)"
            )
    return out
