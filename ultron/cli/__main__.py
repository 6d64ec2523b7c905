"""``python -m ultron.cli``: the same as the ``ultron`` command."""

import sys

from ultron.cli import main

sys.exit(main())
