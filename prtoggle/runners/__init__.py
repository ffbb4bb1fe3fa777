"""Running commands in child processes: plain children, the warm worker, GPU leases."""
