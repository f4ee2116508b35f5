"""The ``recoverykit`` command: a thin skin over the Python API.

Each command lives next to the API it wraps (``recoverykit.cli_*`` modules) and is imported only
when invoked, so ``recoverykit --help`` stays fast and one broken layer cannot take the whole
command down. Exit codes follow Maelstrom's verdicts: 0 valid, 1 invalid, 2 unknown; a usage
error exits 64 (EX_USAGE) so it can never be mistaken for a verdict.
"""

from __future__ import annotations

import importlib
import sys
from enum import IntEnum

import click
from recoverykit import __version__
from recoverykit.errors import RecoveryKitError, UsageError


class Exit(IntEnum):
    VALID = 0
    INVALID = 1
    UNKNOWN = 2
    USAGE = 64
    SOFTWARE = 70  # EX_SOFTWARE: a defect in the kit itself
    INTERRUPTED = 130  # 128 + SIGINT; SIGTERM exits 143 (recoverykit.signals)


# name -> "module:attribute"; the module is imported on first use.
COMMANDS: dict[str, str] = {
    "contract": "recoverykit.cli_contract:contract",
    "model": "recoverykit.cli_model:model",
    "protocol": "recoverykit.cli_protocol:protocol",
    "env": "recoverykit.cli_env:env",
    "certify": "recoverykit.cli_certify:certify",
    "check": "recoverykit.cli_certify:check",
    "chaos": "recoverykit.cli_chaos:chaos",
    "merge": "recoverykit.cli_chaos:merge",
    "report": "recoverykit.cli_report:report",
    "diff": "recoverykit.cli_diff:diff",
    "init": "recoverykit.cli_init:init",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._load(name, quiet=True) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name, quiet=False)

    @staticmethod
    def _load(name: str, *, quiet: bool) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, _, attribute = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if quiet and exc.name == module_name:
                return None  # a command whose layer is not built yet is simply not offered
            raise
        return getattr(module, attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="recoverykit")
def cli() -> None:
    """Model and conformance kit for restart recovery of AI-agent runtimes.

    Verdict exits: 0 valid, 1 invalid, 2 unknown. Usage errors exit 64; a defect in the kit
    itself exits 70 with the traceback saved to a file.
    """


def _visible(exc: BaseException) -> str:
    """An error's text may quote the adapter: show its control characters as escapes (safe_text)."""
    try:
        from recoverykit.conformance.safe_text import visible
    except Exception:  # the layer itself is broken: still never echo a raw control character
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(exc))
    return visible(exc)


def _internal_error(exc: BaseException) -> Exit:
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile("w", prefix="recoverykit-crash-", suffix=".txt", delete=False) as f:
        traceback.print_exception(exc, file=f)
    click.echo(
        f"recoverykit internal error ({type(exc).__name__}: {_visible(exc)}). This is a defect in the kit, not a "
        f"verdict on your runtime; the traceback is in {f.name}. Please report it with that file.",
        err=True,
    )
    return Exit.SOFTWARE


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="recoverykit", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, KeyboardInterrupt):  # Ctrl-C outside a run (a run exits in signals.finish)
            click.echo("interrupted by SIGINT before any run started; exit 130", err=True)
            code = Exit.INTERRUPTED
        else:
            click.echo("Aborted.", err=True)
            code = Exit.UNKNOWN
    except click.UsageError as exc:
        exc.show()
        code = Exit.USAGE
    except click.ClickException as exc:
        exc.show()
        code = Exit.USAGE
    except UsageError as exc:
        click.echo(f"Error: {_visible(exc)}", err=True)
        code = Exit.USAGE
    except RecoveryKitError as exc:
        # A kit-raised error that reached the top without a verdict: say what it was, no traceback.
        click.echo(f"Error ({type(exc).__name__}): {_visible(exc)}", err=True)
        code = Exit.UNKNOWN
    except KeyboardInterrupt:
        click.echo("interrupted by SIGINT; exit 130", err=True)
        code = Exit.INTERRUPTED
    except Exception as exc:  # a defect in the kit itself: short message, full traceback in a file
        code = _internal_error(exc)
    sys.exit(int(code or 0))


if __name__ == "__main__":
    main()
