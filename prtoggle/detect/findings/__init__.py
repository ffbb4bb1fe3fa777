"""What the probes found: check(), hit records and their message, rows to requests."""
