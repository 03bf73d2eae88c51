"""`python -m lifesearch_local` runs the CLI."""

import sys

from lifesearch_local.cli import main

sys.exit(main())
