"""What the CLI commands do, without click: repro, bisect, bench (revert cost), coverage."""
