"""`kbgen diff` and `kbgen check`: the knowledge base compared across git revisions, for review.

`diff` compares two loaded knowledge bases (pure); `revisions` loads them at git revisions, formats
the pull-request comment, and runs the checks a pull request must pass. The top stage: it uses
`record` (recomputing numbers) and `site` (rendering the comment, checking `docs/`).
"""
