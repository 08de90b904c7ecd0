import sys

from seqdedup.cli import main

sys.exit(main())
