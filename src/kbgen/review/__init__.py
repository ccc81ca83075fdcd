"""`kbgen diff` and `kbgen check`: the knowledge base reviewed in pull requests like code.

`diff` compares two loaded knowledge bases (pure); `revisions` loads them at git revisions and
formats the pull-request comment; `lint` is what `kbgen check` refuses. The top stage: it uses
`record` (recomputing numbers) and `site` (rendering the comment, checking `docs/`).
"""
