"""The `sws` command's entry point (also `python -m sws`): Ctrl-C is one line from the moment Python runs sws.

It imports the command line inside the handler, since loading it takes most of a second. Every Ctrl-C ends
here as exit code 130, whether it came while the command line loaded, while typer parsed the arguments (typer
turns it into a silent exit 130) or inside a command (`sws.cli.guarded`), so the line is written in this one
place. (A Ctrl-C while the interpreter itself is still starting, before this module runs, gets Python's own
traceback.)
"""

import sys

INTERRUPTED = 130


def main() -> None:
    try:
        from sws.cli import main as run_cli

        run_cli()
    except KeyboardInterrupt:
        interrupted()
    except SystemExit as stop:
        if stop.code == INTERRUPTED:
            interrupted()
        raise


def interrupted() -> None:
    print("error: interrupted; finished stages are kept, the same command resumes", file=sys.stderr)
    sys.exit(INTERRUPTED)


if __name__ == "__main__":
    main()
