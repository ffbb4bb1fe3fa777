"""Triton kernels and their torch references."""

from __future__ import annotations
