"""One reproduction scenario per fix; run each with `python -m`."""

from __future__ import annotations
