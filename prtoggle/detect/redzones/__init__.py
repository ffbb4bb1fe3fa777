"""Poisoned buffers and redzones: allocation, guarded allocation, reads of a redzone."""
