"""``python -m eventcoord.cli``: the same as the ``eventcoord`` script."""

import sys

from eventcoord.cli import main

sys.exit(main())
