"""The command line: `explain` and `run` in their plain forms start without typer (explain, run, options);
the typer app (app) reads everything else; `serve` starts the crash service (serve)."""
