"""Write revert recipes: drafted from a fix's diff or commit, or rebased onto moved code."""
