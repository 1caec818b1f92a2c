"""One reader per format folder in `grammars/`, named after it (kbdebug.parse.registry pairs them)."""
