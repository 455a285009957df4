"""The `sws` command's entry point (also `python -m sws`): Ctrl-C is one line from the moment Python runs sws.

It imports the command line inside the handler, since loading it takes most of a second. (A Ctrl-C while the
interpreter itself is still starting, before this module runs, gets Python's own traceback.)
"""

import sys


def main() -> None:
    try:
        from sws.cli import main as run_cli

        run_cli()
    except KeyboardInterrupt:  # a command's own Ctrl-C is handled by sws.cli.guarded
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
