"""Source editing of Python functions: match, edit, compile, swap __code__."""
