"""`python -m retrieval`: see retrieval.cli."""

import sys

from retrieval.cli import main

sys.exit(main())
