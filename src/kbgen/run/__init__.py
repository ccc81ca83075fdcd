"""A run as data: the spec, its interleaved design, and the run folder it fills.

The spec and its sweep, the prompts, the design, the samples, run.json's models, the folder
(`runs/<run-id>/`), a window's counters and the time budget. `bench` fills a run folder from a
real server; `record` decides from one. Above `kb`, below `bench`.
"""
