"""Session-wide test setup: Triton kernels run in interpreter mode where no GPU is present."""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    # Must be set before triton is imported anywhere: kernels then run on CPU tensors.
    os.environ.setdefault("TRITON_INTERPRET", "1")
