"""Attention backends."""

from __future__ import annotations
