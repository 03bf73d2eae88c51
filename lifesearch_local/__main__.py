"""`python -m lifesearch_local` runs the CLI."""

import sys

from .cli import main

sys.exit(main())
