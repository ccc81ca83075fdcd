"""kbgen: turn inference-performance experiments into a decision-record knowledge base."""

# The one place the version is written; pyproject.toml reads it from here. A literal, not
# importlib.metadata: that import alone costs 80 ms on every command.
__version__ = "0.1.0"
