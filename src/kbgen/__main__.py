"""`python -m kbgen`: the command line, as the `kbgen` script runs it."""

from kbgen.cli import main

main()
