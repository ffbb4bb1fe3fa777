"""Device probes and host checks: witness tables, the clock, torch and Triton providers."""
