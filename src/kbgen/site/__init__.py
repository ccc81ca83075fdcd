"""`kbgen render`: the knowledge base as Markdown pages for MkDocs.

`render` turns records and plans into page text (pure, Jinja behind it), `charts` draws their
inline SVG, and `build` is the one place that writes `docs/`, with the caches that keep a render
of an unchanged knowledge base cheap. Above `kb`; independent of `record` and `bench`.
"""
