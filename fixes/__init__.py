"""A compact attention stack holding five real sglang fixes."""

from __future__ import annotations
