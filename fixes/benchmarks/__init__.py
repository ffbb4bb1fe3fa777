"""One fix-cost benchmark per fix: the code path each fix changes, timed (`python -m`)."""

from __future__ import annotations
