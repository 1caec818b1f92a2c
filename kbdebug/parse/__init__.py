"""Turn normalised lines into records: each line goes to the readers of the formats in `grammars/` (one
folder per format, one reader per folder in `kbdebug/parse/readers/`, paired by kbdebug.parse.registry),
which build records and join multi-line ones (tracebacks, sanitizer reports, C++ error blocks).

`kbdebug.parse.regions.parse_regions()` is the entry point; `kbdebug.parse.walk.Walk` walks a region's lines.

This file imports nothing: the scanner's needles and the grammars' files are read without building the
record classes or loading lark (`kbdebug run` scans a successful job's output with them alone).
"""
