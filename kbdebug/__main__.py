"""`kbdebug` and `python -m kbdebug`: `run` and `explain` in their plain forms start without typer or the rest
of the CLI (cli_options.fast_command); everything else goes to kbdebug.cli.app."""

import sys


def main() -> None:
    from kbdebug.cli.options import fast_command

    fast = fast_command(sys.argv[1:])
    if fast is not None:
        sys.exit(fast)
    from kbdebug.cli.app import main as cli

    cli()


if __name__ == "__main__":
    main()
