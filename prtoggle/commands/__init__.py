"""What each command does, without click (one module or two per command); cli/ parses, prints."""
