"""Source editing of Python functions: match, edit, compile, swap __code__."""

from __future__ import annotations
