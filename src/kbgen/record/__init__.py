"""`kbgen record`: from a run folder (or another tool's result files) to a record with a verdict.

The evidence and its compact samples file, the figures (measurements, speculative-decoding
statistics), the statistics and the verdict rule, composing the `Record` model, writing it, and
`--check`, which recomputes every number from the stored samples. Above `bench` and `kb`.
"""
