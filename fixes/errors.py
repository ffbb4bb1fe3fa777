"""The demo engine's errors: one root, `EngineError`, separate from prtoggle's `PrToggleError`.

`fixes` is a user of prtoggle, not part of it: an engine bug must surface as the engine's
own exception (with its traceback), never as a one-line prtoggle tool error. Detection
reports raised by `prtoggle.detect` (`NaNDetected`, `OOBDetected`, ...) stay prtoggle's.
"""

from __future__ import annotations

__all__ = [
    "AttentionBackendError",
    "CudaGraphError",
    "DPAttentionError",
    "EngineError",
    "EngineUsageError",
    "KernelContractError",
    "PoolExhaustedError",
]


class EngineError(Exception):
    """Root of every error the demo engine raises on its own account."""


class KernelContractError(EngineError):
    """A kernel was called with inputs or a provider outside its contract."""


class AttentionBackendError(EngineError):
    """An attention backend was driven outside its protocol (missing metadata, wrong spec)."""


class CudaGraphError(EngineError):
    """A graph runner was asked to capture or replay outside what it holds."""


class PoolExhaustedError(EngineError):
    """A pool has fewer free rows or pages than a request asked for."""


class DPAttentionError(EngineError):
    """DP attention was used without an initialised process group, or inconsistently."""


class EngineUsageError(EngineError):
    """A scenario or benchmark was given options it cannot run with (device, provider)."""
