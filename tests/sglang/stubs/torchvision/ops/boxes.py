"""Stand-in for ``torchvision.ops.boxes``: names only, every use raises."""

from __future__ import annotations

from typing import Any

from torchvision import unavailable


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def _stand_in(*args: object, **kwargs: object) -> Any:
        unavailable(f"ops.boxes.{name}")

    return _stand_in
