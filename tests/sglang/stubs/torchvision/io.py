"""Stand-in for ``torchvision.io``: names only, every use raises."""

from __future__ import annotations

import enum
from typing import Any

from torchvision import unavailable


class ImageReadMode(enum.Enum):
    """The enum transformers binds at import time."""

    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def _stand_in(*args: object, **kwargs: object) -> Any:
        unavailable(f"io.{name}")

    return _stand_in
