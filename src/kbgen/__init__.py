"""kbgen: turn inference-performance experiments into a decision-record knowledge base."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kbgen")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
