"""`airflow-commit`: list and abort pending uploads, clean temporary trees, check `_SUCCESS`, prune job records,
report commits.

Destructive commands ask first (like `hadoop s3guard uploads -abort` without `-force`) and
refuse when nobody can answer. Errors are one line on stderr with exit status 2; a failed
verification or a declined prompt exits 1; `--json` output is for machines; progress bars are
drawn only on a terminal. S3 settings follow boto3's environment (`AWS_ENDPOINT_URL`, ...).

One module a command group (`uploads`, `temp`, `success`, `records`, `doctor`, `report`,
`dev_s3`); the three cleanups share one flow (`cli.cleanup`); `arguments` and `output` hold what
every group's parser and answers share.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from airflow_commit_provider.cli import dev_s3, doctor, records, report, success, temp, uploads
from airflow_commit_provider.cli.arguments import PROG, CliError, Parents, Parser
from airflow_commit_provider.cli.output import fail
from airflow_commit_provider.core.store import StoreError

__all__ = ["build_parser", "main"]

#: The groups, in the order `--help` lists them.
GROUPS = (uploads, temp, success, records, doctor, report, dev_s3)


def build_parser() -> argparse.ArgumentParser:
    parents = Parents.build()
    parser = Parser(prog=PROG, description=(__doc__ or "").split("\n", 1)[0])
    groups = parser.add_subparsers(
        dest="group", required=True, metavar="{uploads,temp,success,records,report,doctor,dev-s3}"
    )
    for group in GROUPS:
        group.add_commands(groups, parents)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error already printed as one line
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        fail("interrupted")
        return 130
    except Exception as error:  # every failure is one line; no tracebacks for users
        known = (CliError, ValueError, OSError, StoreError)
        message = str(error) if isinstance(error, known) else f"{type(error).__name__}: {error}"
        fail(message)
        return 2
