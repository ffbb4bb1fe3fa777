"""Recipe files: the schema, the registry of collections, version ranges, and `check`."""
