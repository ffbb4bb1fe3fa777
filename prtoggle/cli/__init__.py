"""The `prtoggle` command line: one module per command, click and the exit-status scheme."""
