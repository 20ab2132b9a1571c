"""sp-scan's command line: the `sp-scan` group; each command lives in its own module.

Every error (SPError, OSError, a usage problem) is one line on stderr and
exit status 2; Ctrl-C is exit status 130. Output already printed stays
valid JSON Lines.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys

import click

from sp_scan.errors import ConfigError, SPError

try:  # the native door checks SP_SCAN_* when it loads: a bad setting is one line and exit 2
    from sp_scan import native
except ConfigError as _exc:
    sys.stderr.write(f"sp-scan: error: {_exc}\n")
    sys.exit(2)

from . import address, blocks, index, interop, serve, wallet  # noqa: E402
from .options import EXIT_ERROR, EXIT_INTERRUPTED, KEYS_HELP, SCAN_KEY_ENV, Group, looks_like_key  # noqa: E402
from .run import Interrupted  # noqa: E402

_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2
_HELP = ("-h", "--help")

# A lone 64-hex-digit token in a usage or file error is a value the user typed (a pasted key):
# click echoes option values, so it is blanked out, never printed.
_TYPED_KEY = re.compile(r"(?<![0-9A-Za-z./\\-])[0-9a-fA-F]{64}(?![0-9A-Za-z./\\-])")


def _unechoed(message: str) -> str:
    return _TYPED_KEY.sub("<64 hex digits, not echoed>", message)


def _fail(message: str) -> None:
    click.echo(f"sp-scan: error: {' '.join(str(message).split())}", err=True)


class App(Group):
    """The `sp-scan` group: `sp-scan BLOCK...` (a first word naming a file) runs the hidden `auto` command; errors are one line."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = args[0] if args else None
        if first is not None and first not in self.commands and first not in (*_HELP, "--version"):
            if os.path.exists(first) or looks_like_key(first) or first.startswith("-"):
                args = ["auto", *args]
        return super().parse_args(ctx, args)

    def main(self, args=None, prog_name=None, **extra):  # type: ignore[override]
        try:
            code = super().main(args=args, prog_name=prog_name or "sp-scan", standalone_mode=False, **extra)
        except click.exceptions.Abort:
            click.echo("sp-scan: interrupted", err=True)
            code = EXIT_INTERRUPTED
        except Interrupted as exc:
            hint = f"; resume with --from {exc.resume}" if exc.resume is not None else ""
            click.echo(f"sp-scan: interrupted{hint}", err=True)
            code = EXIT_INTERRUPTED
        except KeyboardInterrupt:
            click.echo("sp-scan: interrupted", err=True)
            code = EXIT_INTERRUPTED
        except _NO_ARGS_IS_HELP as exc:  # bare `sp-scan` or a bare group: help, not an error
            click.echo(exc.ctx.get_help())
            code = 0
        except click.ClickException as exc:
            _fail(_unechoed(exc.format_message()))
            code = EXIT_ERROR
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly.
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            code = 1
        except SPError as exc:
            _fail(str(exc))
            code = EXIT_ERROR
        except MemoryError:
            _fail("out of memory (the input is too large for this machine)")
            code = EXIT_ERROR
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            _fail(_unechoed(f"{where}{exc.strerror or exc}"))
            code = EXIT_ERROR
        sys.exit(code if isinstance(code, int) else 0)


def version_text() -> str:
    """`sp-scan --version`: the package version and the engines in use."""
    try:
        version = importlib.metadata.version("sp-scan")
    except importlib.metadata.PackageNotFoundError:
        version = "(not installed)"
    sha = native.sha256_impl() if native.ENABLED else "hashlib"
    return f"sp-scan {version} (EC engine: {native.ec_engine()}; sha256: {sha})"


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


@click.group(name="sp-scan", cls=App, context_settings={"help_option_names": list(_HELP)}, help=f"""Silent Payments (BIP352) scanner for blocks from your Bitcoin Core node.

\b
sp-scan BLOCK... alone scans when keys are configured (a scan key file or
{SCAN_KEY_ENV}, and a spend public key) and lists tweaks otherwise.
{KEYS_HELP}""")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version, help="Show the version and the EC engine in use, then exit.")
def app() -> None:
    pass


# Commands are reached through their modules, so no command object shadows a submodule (sp_scan.cli.index).
for _command in (blocks.tweaks, blocks.scan, blocks.extract, blocks.auto, address.address, index.index, serve.serve_command, interop.psbt, interop.descriptor, wallet.wallet):
    app.add_command(_command)


def main() -> None:
    """The console-script entry point (`sp-scan = sp_scan.cli:main`); exits with the status."""
    app.main(prog_name="sp-scan")
