"""What a benchmark records of the machine it ran on: the CPU model, an installed version."""

from __future__ import annotations

import importlib.metadata
import platform


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what `platform` says, else `unknown CPU`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def distribution_version(distribution: str) -> str:
    """The installed version of `distribution`, or `not installed`."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
