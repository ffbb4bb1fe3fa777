"""Entry point for `python -m prtoggle`."""

from __future__ import annotations

from prtoggle.cli.main import main

main()
