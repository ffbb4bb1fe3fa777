"""Speculative-decoding workers and their CUDA graph runners."""

from __future__ import annotations
