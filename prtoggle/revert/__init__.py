"""Reverting fixes in a running process: the toggle API, its process-global state, sglang's API."""
