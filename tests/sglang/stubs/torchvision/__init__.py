"""Import-time stand-in for torchvision, used by prtoggle's sglang suite only.

sglang 0.5.23 imports ``torchvision.transforms`` at module import for vision helpers
(``sglang.srt.multimodal.internvl_utils``, ``sglang.srt.configs.deepseek_ocr``) that the
attention and speculative modules under test never call. PyPI's torchvision wheel cannot
register its C++ operators against the CPU torch of this environment
(``operator torchvision::nms does not exist``), so the real package cannot be imported here.
This stand-in provides the names those imports bind; using any of them raises.
"""

from __future__ import annotations

from typing import NoReturn

__version__ = "0.0.0+prtoggle-stub"
IS_PRTOGGLE_STUB = True


def unavailable(name: str) -> NoReturn:
    """Raise: the stand-in has no behaviour, only names for sglang's imports."""
    raise RuntimeError(
        f"torchvision.{name} was called, but this is prtoggle's sglang-suite stand-in "
        "(tests/sglang/stubs/torchvision); the real torchvision cannot load on CPU torch here"
    )
