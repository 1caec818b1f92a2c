"""`kbdebug` and `python -m kbdebug`: `kbdebug run` starts without typer or the rest of the CLI (a job
wrapper must cost its job nothing, see cli_run.fast_run); every other command goes to kbdebug.cli."""

import sys


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        from kbdebug.cli_run import fast_run

        fast = fast_run(sys.argv[2:])
        if fast is not None:
            sys.exit(fast)
    from kbdebug.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
