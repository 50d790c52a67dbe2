"""`python -m adapters.wrapper <adapter> [command] [args]` (what the `reef-<adapter>` stub runs)."""

from __future__ import annotations

import sys

from adapters.wrapper.cli import main

sys.exit(main(sys.argv[1:]))
