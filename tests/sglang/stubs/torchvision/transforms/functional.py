"""Stand-in for ``torchvision.transforms.functional``: names only, every use raises."""

from __future__ import annotations

import enum
from typing import Any

from torchvision import unavailable


class InterpolationMode(enum.Enum):
    """The enum sglang binds at import time (values as torchvision names them)."""

    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def _stand_in(*args: object, **kwargs: object) -> Any:
        unavailable(f"transforms.functional.{name}")

    return _stand_in
