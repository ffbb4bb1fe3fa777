"""Stand-in for ``torchvision.transforms``: names only, every use raises."""

from __future__ import annotations

from typing import Any

from torchvision import unavailable
from torchvision.transforms import functional
from torchvision.transforms.functional import InterpolationMode

__all__ = ["InterpolationMode", "functional"]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def _stand_in(*args: object, **kwargs: object) -> Any:
        unavailable(f"transforms.{name}")

    return _stand_in
