"""``python -m annette_torch.cli``: the `annette` command."""

import sys

from .app import main

sys.exit(main())
