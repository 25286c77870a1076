"""What every command's parser shares: the parser class, the argument types, the parent parsers
(the store options, a cleanup's scope and age, a destructive command's `--dry-run` and `--yes`),
the error a command raises for users, and opening the store a command names.

The words (the project's, in every argument, help text and message): a **destination** is where a
job writes, a table's root folder; a **scope** is what a cleanup acts on; a **path** is one stored
file or object; a **location** is only a catalog's partition location.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import timedelta
from typing import NoReturn

from airflow_commit_provider.cleanup import (
    DEFAULT_MAX_JOB_DURATION,
    format_duration,
    parse_duration,
    parse_scope,
)
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store, open_store

PROG = "airflow-commit"
#: The positional argument of a cleanup of uploads or temporary trees: the directory it acts in.
SCOPE = "SCOPE"
#: The positional argument of the commands about a job's output and records: where it writes.
DESTINATION = "DESTINATION"
#: What a cleanup's SCOPE is, for its help text.
CLEANUP_SCOPE = "the directory the cleanup acts in, never a plain prefix (out/t does not cover out/t2)"
#: How a scope or destination is written, for the help texts.
URL_FORMS = "s3://bucket/prefix, s3a://..., file:///path or a path"


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """Errors end with a pointer to --help. The shared parent parsers are of this class too:
    subcommands are built from the root parser's class, and their parents must match it."""

    def error(self, message: str) -> NoReturn:
        # One line, as every error here: argparse quotes some arguments, not unrecognised ones.
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see --help)\n")


def duration(text: str) -> timedelta:
    try:
        return parse_duration(text, "--older-than")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).split(": ", 1)[1]) from error


def count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number (0 or more), got {text!r}")
    return int(text)


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


@dataclass(frozen=True)
class Parents:
    """The parent parsers the command groups build their commands from."""

    common: Parser
    """The store's endpoint, `--json` and `--threads`: every command that opens a store."""
    destructive: Parser
    """`--dry-run` and `--yes`: every command that deletes."""

    @classmethod
    def build(cls) -> Parents:
        common = Parser(add_help=False)
        common.add_argument("--endpoint-url", help="S3 endpoint (overrides AWS_ENDPOINT_URL)")
        common.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
        common.add_argument("--threads", type=positive, default=16, help="parallel requests (default 16)")
        destructive = Parser(add_help=False)
        destructive.add_argument(
            "--dry-run", action="store_true", help="report what would be done, change nothing"
        )
        destructive.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
        return cls(common, destructive)

    def scoped(self, default_age: timedelta, metavar: str = SCOPE, help: str = CLEANUP_SCOPE) -> Parser:
        """The arguments of every cleanup's listing: its scope (`metavar` names it), an age (with the
        kind's own default), a job."""
        scoped = Parser(add_help=False, parents=[self.common])
        add_scope(scoped, metavar, help)
        scoped.add_argument(
            "--older-than",
            type=duration,
            default=default_age,
            metavar="DURATION",
            help=f"only what is at least this old: 90s, 15m, 6h, 2d "
            f"(default {format_duration(default_age.total_seconds())})",
        )
        scoped.add_argument("--job-id", help="only what belongs to this job")
        add_allow_bucket_root(scoped)
        return scoped


def add_live_job_fence(parser: argparse.ArgumentParser) -> None:
    """`--max-job-duration` of the cleanups that spare a live job (`uploads`, `temp`), however old
    what it needs."""
    parser.add_argument(
        "--max-job-duration",
        type=duration,
        default=DEFAULT_MAX_JOB_DURATION,
        metavar="DURATION",
        help="an undecided job set up less than this long ago is live and what it needs is kept, however "
        "old, unless the job recorded its own timeout or --job-id names it "
        f"(default {format_duration(DEFAULT_MAX_JOB_DURATION.total_seconds())})",
    )


def add_scope(parser: argparse.ArgumentParser, metavar: str, help: str) -> None:
    """The positional a cleanup acts on: `args.scope`, named `metavar` in help and errors."""
    parser.add_argument("scope", metavar=metavar, help=f"{help}: {URL_FORMS}")
    parser.set_defaults(scope_argument=metavar)


def add_allow_bucket_root(parser: argparse.ArgumentParser) -> None:
    """`--allow-bucket-root`, without which the scope (`add_scope`) may not be a whole bucket."""
    what = parser.get_default("scope_argument").lower()
    parser.add_argument(
        "--allow-bucket-root", action="store_true", help=f"allow a {what} that is a whole bucket"
    )


def scope_of(args: argparse.Namespace) -> StorePath:
    """Validate the scope before opening anything, naming it as the help does and as the user typed it."""
    return parse_scope(args.scope, argument=args.scope_argument, allow_bucket_root=args.allow_bucket_root)


def store_for(args: argparse.Namespace, where: str) -> Store:
    """The store holding `where`, with the command's endpoint and threads."""
    options = {"endpoint_url": args.endpoint_url} if args.endpoint_url else {}
    return open_store(StorePath.parse(where), threads=args.threads, **options)
