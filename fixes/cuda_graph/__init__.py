"""CUDA graph capture and replay, and the graph runners built on it."""

from __future__ import annotations
