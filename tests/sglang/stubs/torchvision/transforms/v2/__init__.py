"""Stand-in for ``torchvision.transforms.v2``: names only, every use raises."""

from __future__ import annotations

from typing import Any

from torchvision import unavailable


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def _stand_in(*args: object, **kwargs: object) -> Any:
        unavailable(f"transforms.v2.{name}")

    return _stand_in
