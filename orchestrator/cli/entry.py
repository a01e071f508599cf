"""The process entry point: usage errors as JSON too, arguments checked for UTF-8, stdout
and stderr that survive a closed pipe, and the exit code the command earned."""

from __future__ import annotations

import gc
import sys

from orchestrator.cli.commands import EXIT_CODES, app
from orchestrator.cli.output import EXIT_BAD_INPUT, MAX_MESSAGE_CHARS, error_document, pipe_safe
from orchestrator.limits import clip

__all__ = ["main", "run_cli", "app", "EXIT_CODES"]


def main(argv: list[str] | None = None) -> None:
    # A CLI process is short-lived and allocates mostly at import time: the collector's
    # passes over those objects cost ~50-80 ms per start and as much again at exit.
    # Collection is switched back on (with import-time objects frozen) before a graph
    # runs; see collect_from_here_on().
    gc.disable()
    pipe_safe()
    try:
        code = run_cli(sys.argv[1:] if argv is None else argv)
    finally:
        gc.freeze()
    sys.exit(code)


def run_cli(args: list[str]) -> int:
    """Run one command line; return its exit code. Usage errors (an unknown option, a bad
    value) print Click's message on stderr and, under --json, one JSON document on stdout."""
    from typer import Abort

    try:  # Typer >= 0.24 carries its own copy of Click
        from typer._click.exceptions import ClickException, NoArgsIsHelpError
    except ImportError:  # pragma: no cover  (older Typer on Click)
        from click.exceptions import (  # type: ignore[assignment]
            ClickException,
            NoArgsIsHelpError,
        )

    as_json = "--json" in (args[: args.index("--")] if "--" in args else args)
    bad = _not_utf8(args)
    if bad is not None:
        sys.stderr.write(f"error: {bad}\n")
        if as_json:
            sys.stdout.write(error_document(bad, EXIT_BAD_INPUT) + "\n")
        return EXIT_BAD_INPUT
    try:
        result = app(args=args or ["--help"], prog_name="orchestrator", standalone_mode=False)
    except NoArgsIsHelpError as exc:  # `orchestrator db`: its help, like `orchestrator`
        sys.stdout.write(exc.format_message() + "\n")
        return 0
    except ClickException as exc:
        # (Typer checks a value through pydantic, whose "Value error, " is not for people)
        exc.message = exc.message.removeprefix("Value error, ")
        message = clip(exc.format_message(), MAX_MESSAGE_CHARS)  # it quotes the value given
        if len(message) < len(exc.format_message()):
            exc.message = message
        exc.show()
        if as_json:
            sys.stdout.write(error_document(message, exc.exit_code) + "\n")
        return exc.exit_code
    except Abort:
        sys.stderr.write("aborted\n")
        return 1
    return result if isinstance(result, int) else 0


def _not_utf8(args: list[str]) -> str | None:
    """Python decodes undecodable argument bytes to lone surrogates; name the first one."""
    for index, arg in enumerate(args):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            option = args[index - 1] if index and args[index - 1].startswith("-") else None
            what = f"the value of {option}" if option else f"the argument {index + 1}"
            return (
                f"{what} is not valid UTF-8 text: {shown[:60]}; give it as UTF-8 "
                "(check the terminal's or the script's encoding)"
            )
    return None
