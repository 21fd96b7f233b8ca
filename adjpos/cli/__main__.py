"""``python -m adjpos.cli``: the ``adjpos`` command without its console script."""

import sys

from adjpos.cli import main

sys.exit(main())
