"""``python -m backend.cli …``: the ``layerscope`` command (the worker slots and the demo's
worker are started this way)."""

import sys

from backend.cli.entry import main

if __name__ == "__main__":
    sys.exit(main())
