"""Running one command, under `airflow-commit` (the package's `main`) or `airflow commit-protocols`
(the function `definition.get_cli_commands` gives Airflow): its handler imported only now, every
failure one line on stderr with exit status 2, Ctrl-C 130."""

from __future__ import annotations

import argparse
import importlib

from airflow_commit_provider.cli.arguments import CliError
from airflow_commit_provider.cli.names import PROG
from airflow_commit_provider.cli.output import fail
from airflow_commit_provider.core.store import StoreError


def run(args: argparse.Namespace, prog: str = PROG) -> int:
    """Run `args.handler` (`module.function`) on `args`; its exit status."""
    module, _, function = args.handler.rpartition(".")
    handler = getattr(importlib.import_module(module), function)
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        fail("interrupted", prog)
        return 130
    except Exception as error:  # every failure is one line; no tracebacks for users
        known = (CliError, ValueError, OSError, StoreError)
        message = str(error) if isinstance(error, known) else f"{type(error).__name__}: {error}"
        fail(message, prog)
        return 2
