"""``python -m seqdedup.cli``: the command line, as ``seqdedup`` runs it."""
import sys

from . import main

if __name__ == "__main__":      # (not when a module walk imports it: tests/test_docs.py)
    sys.exit(main())
