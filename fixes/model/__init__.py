"""Models of the demo engine: the toy attention model, request builders, the tiny draft model."""

from __future__ import annotations
