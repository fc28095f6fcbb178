"""``python -m rfabric.cli``: the ``rfabric`` command."""

import sys

from .parser import main

sys.exit(main())
