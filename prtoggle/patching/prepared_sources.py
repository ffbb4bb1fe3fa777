"""What a revert reads of a source file, worked out ahead: a warm server does it before it forks.

A revert of a function of file F reads F's lines (linecache), its module scope (names
and imports), F compiled whole (the freshness check) and F's symbol table (the variables
of enclosing functions). Each is kept per process and per version of F, so a process
that prepared F hands them to every child it forks: `bisect --git` asks its warm server
to prepare the files its candidates change, and each probe's revert then skips them.
"""

from __future__ import annotations

import linecache
import logging
from collections.abc import Iterable

from prtoggle.patching.enclosing import MODULE_TABLE_CACHE_SIZE, module_table
from prtoggle.patching.freshness import COMPILED_FILE_CACHE_SIZE, compiled_file
from prtoggle.patching.module_scope import CACHE_SIZE, module_scope

logger = logging.getLogger(__name__)

MOST_FILES = min(COMPILED_FILE_CACHE_SIZE, MODULE_TABLE_CACHE_SIZE, CACHE_SIZE) // 2
"""How many files one call prepares: half of what each cache keeps, so that the files a
revert reads besides them stay too."""


def prepare_sources(filenames: Iterable[str]) -> int:
    """Read, parse and compile each of `filenames` (the first MOST_FILES, Python source files
    of loaded modules) as a revert of one of its functions would; how many were read. A
    file that cannot be read is left out: the revert that needs it says why."""
    prepared = 0
    for filename in list(dict.fromkeys(filenames))[:MOST_FILES]:
        lines = linecache.getlines(filename)
        if not lines or module_scope(filename) is None:
            logger.debug("not prepared (unreadable or not Python): %s", filename)
            continue
        text = "".join(lines)
        compiled_file(filename, text)
        module_table(text, filename)
        prepared += 1
    return prepared
