"""tests/prtoggle: its folder (shared fakes and fixtures) is importable from every sub-folder."""
