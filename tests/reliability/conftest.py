"""Fixtures of the reliability suite (real processes, real signals, real files)."""

from __future__ import annotations

from processes import sleeping_project

__all__ = ["sleeping_project"]
