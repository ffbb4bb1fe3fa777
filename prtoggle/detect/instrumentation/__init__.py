"""Automatic instrumentation: every module's output, every function's result, padding."""
