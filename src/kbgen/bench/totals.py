"""A run's totals (`summary.json`): per variant its requests, tokens and window time.

With the server's counter deltas per window and the client/server token cross-check.
"""

from __future__ import annotations

from kbgen.bench import metrics
from kbgen.errors import InvalidInput, MetricsError, Problem
from kbgen.run.folder import RunFolder
from kbgen.run.models import RunMeta, RunTotals, VariantTotals
from kbgen.run.samples import Sample, request_of
from kbgen.run.spec import ExperimentSpec


def totals(
    spec: ExperimentSpec,
    folder: RunFolder,
    meta: RunMeta | None = None,
    samples: list[Sample] | None = None,
) -> RunTotals:
    """Per-variant totals, server counter deltas and the client/server token cross-check
    (`meta` and `samples`: the folder's, when the caller has read them already)."""
    meta = folder.meta() if meta is None else meta
    samples = folder.samples() if samples is None else samples
    out = RunTotals(spec_id=spec.id, variants={})
    for name, info in meta.variants.items():
        mine = [s for s in samples if s.variant == name]
        ok = [s for s in mine if s.ok]
        windows = []
        for w in info.windows:
            if not w.after:
                continue
            before, after = metrics.read(folder, w.before), metrics.read(folder, w.after)
            try:
                counted = metrics.window(before, after, info.model)
            except MetricsError as exc:  # the snapshots kept are the input here: name them
                raise InvalidInput([Problem(folder.path / w.after, None, "", str(exc))]) from exc
            in_window = [
                s for s in mine if s.attempt == w.attempt and w.start_ns <= s.sent_ns <= w.end_ns
            ]
            client_tokens = sum(s.output_tokens or 0 for s in in_window)
            counted.client_output_tokens = client_tokens
            counted.tokens_match = counted.generation_tokens == client_tokens
            counted.window_s = (w.end_ns - w.start_ns) / 1e9
            if w.round is not None:
                counted.round = w.round
            if w.level is not None:
                counted.level = w.level
            if w.load is not None:
                counted.load = w.load
            windows.append(counted)
        duration = sum((w.end_ns - w.start_ns) for w in info.windows) / 1e9
        out.variants[name] = VariantTotals(
            engine_version=info.engine_version,
            model=info.model,
            requests_ok=len({request_of(s) for s in ok}),
            requests_failed=len(
                {request_of(s) for s in mine if not s.ok} - {request_of(s) for s in ok}
            ),
            output_tokens=sum(s.output_tokens or 0 for s in ok),
            window_s=duration,
            output_tok_s=sum(s.output_tokens or 0 for s in ok) / duration if duration else None,
            windows=windows,
            tokens_match=all(w.tokens_match for w in windows) if windows else None,
        )
    return out
