"""`kbgen bench` and `kbgen record`: an experiment measured, and turned into a record."""

from __future__ import annotations

from pathlib import Path

import click

from kbgen import errors
from kbgen.cli.group import (
    cli,
    records_option,
)


@cli.command()
@click.argument("spec_file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--resume",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="RUN",
    help="Continue an interrupted run folder instead of starting a new one.",
)
@click.option(
    "--runs",
    "runs_root",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    default=Path("runs"),
    show_default=True,
    help="Folder that receives the new run folder.",
)
@click.option(
    "--estimate",
    is_flag=True,
    help="Start nothing: print the design's cost and the prompts it needs, from --records.",
)
@click.option(
    "--ray",
    metavar="ADDRESS",
    help="Run the spec's blocks on a Ray cluster (kbgen[ray]): local (start one here), auto, "
    "ray://HOST:PORT.",
)
@records_option(must_exist=False)
def bench(
    spec_file: Path | None,
    resume: Path | None,
    runs_root: Path,
    estimate: bool,
    ray: str | None,
    records: Path,
) -> None:
    """Run an experiment spec against a real LLM server and keep every raw sample.

    Starts (or reaches) the server once per variant, warms it up, streams every prompt of
    every class, scrapes /metrics around the measurement window, and writes everything to
    runs/<run-id>/. A killed or failed run keeps what it measured: continue it with --resume.
    Exit 5 when the server could not be started or died. With --ray, each of the spec's
    `cluster.blocks` runs every arm on a node of its own; its node lost, it runs again elsewhere.

    No secret reaches the run folder: its copy of the spec has them masked, so a spec that is
    to be resumed takes them from the environment, written as ${NAME} (in a server's URL, and a
    process server's command, model, args and env).

    \b
    Example:
      kbgen bench bench/experiments/ngram-vs-baseline.yaml
      kbgen bench --resume runs/20261129T101500-ngram-vs-baseline
      kbgen bench bench/experiments/ngram-vs-baseline.yaml --estimate
      kbgen bench bench/experiments/ngram-vs-baseline.yaml --ray local
    """
    from kbgen.bench import command as bench_stage
    from kbgen.bench import progress
    from kbgen.record import command, stopping

    if estimate:
        click.echo("\n".join(command.estimate_spec(spec_file, resume, records)))
        return
    run = bench_stage.prepare(spec_file, resume, runs_root, ray)
    folder = run.folder
    click.echo(f"run folder: {folder.path} (attempt {run.meta.attempts})", err=True)
    try:
        look = stopping.looker(run.experiment, folder)
        totals = bench_stage.execute(run, ray, look, lambda line: click.echo(line, err=True))
    except KeyboardInterrupt:
        again = f"kbgen bench --resume {folder.path}" + (f" --ray {ray}" if ray else "")
        click.echo(f"interrupted; samples kept. Continue with: {again}", err=True)
        raise SystemExit(130) from None
    for each in totals:
        progress.show(progress.totals_table(each))
    click.echo(str(folder.path))  # alone on stdout: `run=$(kbgen bench spec.yaml)` works


@cli.command()
@click.argument("targets", nargs=-1, required=True)
@click.option(
    "--from",
    "tool",
    type=click.Choice(["vllm-bench", "guidellm", "aiperf", "vllm-bench-sweep"]),
    help="TARGETS are VARIANT=FILE result files of this tool, the baseline first (aiperf: each "
    "arm's artifact folder); vllm-bench-sweep: one FOLDER, the experiment folder of `vllm bench "
    "sweep serve`.",
)
@click.option(
    "--into",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="Fill in this planned record (made by `kbgen new`) instead of writing a new one.",
)
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="With --from: the spec the files ran (hypothesis, variants' settings, hardware, …).",
)
@click.option(
    "--prompts",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="With --from: the prompt file (JSONL of class and prompt) the tool sent; requests take "
    "their classes from it, matched by prompt text (GuideLLM) or by position (vllm bench serve "
    "--dataset-name custom --disable-shuffle).",
)
@records_option(must_exist=False)
@click.option(
    "--allow-mismatch",
    is_flag=True,
    help="Compare variants measured on different engine versions, models or workloads; "
    "the record says so.",
)
@click.option(
    "--allow-summary-only",
    is_flag=True,
    help="With --from: decide from imported means when there are no per-request samples "
    "(no confidence interval; the record says so).",
)
@click.option(
    "--accept-time-confound",
    is_flag=True,
    help="With --from: decide from one run per arm, the arms confounded with any drift of the "
    "server (as a spec's workload.accept_time_confound; the record says so).",
)
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="TARGETS are records: recompute their numbers from their samples, report differences.",
)
@click.option("--update", is_flag=True, help="--check, and rewrite what differs (new rules).")
def record(
    targets: tuple[str, ...],
    tool: str | None,
    into: Path | None,
    spec_path: Path | None,
    prompts: Path | None,
    records: Path,
    allow_mismatch: bool,
    allow_summary_only: bool,
    accept_time_confound: bool,
    check_only: bool,
    update: bool,
) -> None:
    """Turn a bench run into a record with statistics and a verdict; import; or check.

    Summarises every metric per variant and prompt class (n, mean, median, p90, p99, stdev),
    adds the speculative-decoding figures, and decides the hypothesis with Student-t intervals
    over prompts, the error controlled over the whole record. The compact samples are written
    beside the record so that `kbgen record --check` can recompute every number later.

    \b
    Example:
      kbgen record runs/20261129T101500-ngram-vs-baseline
      kbgen record runs/20261129T101500-ngram-vs-baseline --into records/2026-11-29-ngram.yaml
      kbgen record --from vllm-bench baseline=base.json ngram=ngram.json --spec exp.yaml
      kbgen record --from vllm-bench baseline=b.json ngram=n.json --spec exp.yaml --prompts p.jsonl
      kbgen record --from vllm-bench-sweep results/tiny-sweep --spec exp.yaml
      kbgen record --check records/2026-11-29-ngram-vs-baseline.yaml
      kbgen record --check --update records/*.yaml
    """
    from kbgen.record.command import check, record_import, record_run, summary

    if (prompts is not None or accept_time_confound) and tool is None:
        raise errors.UsageError("--prompts and --accept-time-confound go with --from")
    if check_only or update:
        for line in check([Path(t) for t in targets], update):
            click.echo(line)
        return
    if tool is not None:
        allow = (allow_mismatch, allow_summary_only, accept_time_confound)
        path = record_import(tool, [*targets], records, into, spec_path, *allow, prompts=prompts)
    else:
        if len(targets) != 1:
            raise errors.UsageError("give one run folder (or --from TOOL VARIANT=FILE ...)")
        run = Path(targets[0])
        if not run.is_dir():
            raise errors.UsageError(f"{run}: no such run folder")
        path = record_run(run, records, into, allow_mismatch)
    click.echo(str(path))
    for line in summary(path):  # stderr: stdout stays the record's path alone, for scripts
        click.echo(line, err=True)
