"""Every command of the CLI, declared once, and the two parsers built from it.

`airflow-commit` (`build_parser`, for Airflow 3.1 and hosts without Airflow's metadata database) and
`airflow commit-protocols` (`get_cli_commands`, the provider info's `cli`, Airflow 3.2+) are the same
commands with the same arguments and the same handlers. A handler is named by its import path and
imported only when its command runs: Airflow calls `get_cli_commands` whenever any `airflow` command
starts, so this module imports no boto3, no rich and none of the command groups' modules.

The words (the project's, in every argument, help text and message): a **destination** is where a
job writes, a table's root folder; a **scope** is what a cleanup acts on; a **path** is one stored
file or object; the job's identifier is the **job ID** (`--job-id`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NoReturn

from airflow_commit_provider.cli.names import AIRFLOW_GROUP, DESTINATION, DISTRIBUTION, PROG, SCOPE, URL_FORMS
from airflow_commit_provider.durations import (
    DEFAULT_MAX_JOB_DURATION,
    DEFAULT_OLDER_THAN,
    DEFAULT_RECORDS_OLDER_THAN,
    format_duration,
    parse_duration,
)

#: `-o/--output`: Airflow's own choices, `table` (for people) first.
OUTPUT_FORMATS = ("table", "json", "yaml", "plain")
_HANDLERS = "airflow_commit_provider.cli."


class Parser(argparse.ArgumentParser):
    """Errors end with a pointer to --help, on one line as every error here."""

    def error(self, message: str) -> NoReturn:
        # argparse quotes some arguments, not unrecognised ones, and may wrap.
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see --help)\n")


# Argument types: a bad value is refused at parse time, naming the argument. ---------------------------
def duration(text: str) -> timedelta:
    try:
        return parse_duration(text, "DURATION")
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


def package_version() -> str:
    return importlib.metadata.version(DISTRIBUTION)


class _Version(argparse.Action):
    """`--version`: the installed package's version, then exit (as argparse's own, which needs a
    `version` keyword Airflow's `Arg` cannot pass)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        print(f"{DISTRIBUTION} {package_version()}")
        parser.exit()


class _JsonAlias(argparse.Action):
    """`--json`, the first spelling of `-o json`: kept for the scripts that use it, unlisted. It has
    no default of its own: `-o`'s stands, whichever of the two a parser adds first (Airflow sorts them)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest="output", default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, *_: Any) -> None:
        namespace.output = "json"


# The declarations. ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Arg:
    """One argument: `flags` and the keywords Airflow's `airflow.cli.cli_config.Arg` takes (help,
    action, default, nargs, type, choices, required, metavar, dest), so that both parsers add it alike."""

    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, *flags: str, **options: Any) -> Arg:
        return cls(flags, options)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(*self.flags, **self.options)


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    handler: str
    """The function that runs it, by import path under `airflow_commit_provider.cli.`: `uploads.list_pending`."""
    args: tuple[Arg, ...]
    description: str | None = None


@dataclass(frozen=True)
class Group:
    name: str
    help: str
    commands: tuple[Command, ...]


def _store_options() -> tuple[Arg, ...]:
    """What every command takes: it opens a store, and answers."""
    return (
        Arg.of(
            "--aws-conn-id",
            metavar="CONN_ID",
            help="the Airflow connection (the Amazon provider's aws type) for s3:// locations: its "
            "credentials, role, region and endpoint_url, resolved as Airflow's AWS hooks do. Without one, "
            "boto3's environment (AWS_ENDPOINT_URL, AWS_PROFILE, ...). Where there is no metadata "
            "database (airflow-commit on a plain host), connections come from AIRFLOW_CONN_<CONN_ID> "
            "environment variables or a configured secrets backend",
        ),
        Arg.of("--endpoint-url", help="S3 endpoint (overrides the connection's and AWS_ENDPOINT_URL)"),
        Arg.of(
            "-o",
            "--output",
            choices=OUTPUT_FORMATS,
            default="table",
            metavar="(table, json, yaml, plain)",
            help="output format: table for people (default); json or yaml, one document; plain, one "
            "tab-separated line per item after a header line (a single record: one field per line)",
        ),
        Arg.of("--json", action=_JsonAlias, help=argparse.SUPPRESS),
        Arg.of("--threads", type=positive, default=16, help="parallel requests (default 16)"),
        Arg.of("--version", action=_Version, help="print the package version and exit"),
    )


_DESTRUCTIVE = (
    Arg.of("--dry-run", action="store_true", help="report what would be done, change nothing"),
    Arg.of("-y", "--yes", action="store_true", help="do not ask for confirmation"),
)
_CLEANUP_SCOPE = "the directory the cleanup acts in, never a plain prefix (out/t does not cover out/t2)"


def _place(metavar: str, help: str) -> tuple[Arg, ...]:
    """A cleanup's positional (`args.scope` or `args.destination`, named `metavar`) and the switch
    without which it may not be a whole bucket."""
    return (
        Arg.of(metavar.lower(), metavar=metavar, help=f"{help}: {URL_FORMS}"),
        Arg.of(
            "--allow-bucket-root",
            action="store_true",
            help=f"allow a {metavar.lower()} that is a whole bucket",
        ),
    )


def _aged(default_age: timedelta) -> tuple[Arg, ...]:
    """Every cleanup listing's age (with the kind's own default) and job."""
    return (
        Arg.of(
            "--older-than",
            type=duration,
            default=default_age,
            metavar="DURATION",
            help=f"only what is at least this old: 90s, 15m, 6h, 2d "
            f"(default {format_duration(default_age.total_seconds())})",
        ),
        Arg.of("--job-id", help="only what belongs to this job"),
    )


#: The cleanups that spare a live job (`uploads`, `temp`), however old what it needs.
_LIVE_JOB_FENCE = Arg.of(
    "--max-job-duration",
    type=duration,
    default=DEFAULT_MAX_JOB_DURATION,
    metavar="DURATION",
    help="an undecided job set up less than this long ago is live and what it needs is kept, however "
    "old, unless the job recorded its own timeout or --job-id names it "
    f"(default {format_duration(DEFAULT_MAX_JOB_DURATION.total_seconds())})",
)


def _groups() -> tuple[Group | Command, ...]:
    """Every command, in the order `--help` lists them."""
    store = _store_options()
    uploads = (*_place(SCOPE, _CLEANUP_SCOPE), *_aged(DEFAULT_OLDER_THAN), _LIVE_JOB_FENCE, *store)
    temp = (
        *_place(SCOPE, _CLEANUP_SCOPE),
        *_aged(DEFAULT_OLDER_THAN),
        _LIVE_JOB_FENCE,
        Arg.of("--nested", action="store_true", help="also search below subdirectories"),
        *store,
    )
    records_place = _place(
        DESTINATION, "the destination (a table's root folder) whose records are listed or pruned"
    )
    records = (
        *records_place,
        *_aged(DEFAULT_RECORDS_OLDER_THAN),
        Arg.of(
            "--keep-newest",
            type=count,
            default=0,
            metavar="N",
            help="also keep the N newest of the jobs older than --older-than (default 0)",
        ),
        Arg.of(
            "--max-job-duration",
            type=duration,
            default=DEFAULT_MAX_JOB_DURATION,
            metavar="DURATION",
            help="the longest a job runs; --older-than may not be shorter, so that no abort outcome "
            "still fencing an orphaned driver goes "
            f"(default {format_duration(DEFAULT_MAX_JOB_DURATION.total_seconds())})",
        ),
        *store,
    )
    success_destination = Arg.of(
        "destination",
        metavar=DESTINATION,
        help=f"the destination (a table's root folder) or its _SUCCESS file: {URL_FORMS}",
    )
    destination = Arg.of(
        "destination", metavar=DESTINATION, help=f"a destination (a table's root folder): {URL_FORMS}"
    )
    return (
        Group(
            "uploads",
            "pending multipart uploads",
            (
                Command("list", "list pending uploads with their sizes", "uploads.list_pending", uploads),
                Command(
                    "abort",
                    "abort pending uploads",
                    "uploads.abort_pending",
                    (
                        *uploads,
                        *_DESTRUCTIVE,
                        Arg.of(
                            "--sizes",
                            action="store_true",
                            help="measure parts and bytes first; one more request per upload "
                            "(a dry run always measures)",
                        ),
                    ),
                ),
            ),
        ),
        Group(
            "temp",
            "temporary trees of failed jobs",
            (
                Command("list", "list temporary trees", "temp.list_trees", temp),
                Command("clean", "delete stale temporary trees", "temp.clean_trees", (*temp, *_DESTRUCTIVE)),
            ),
        ),
        Group(
            "success",
            "_SUCCESS files",
            (
                Command(
                    "show",
                    "show a _SUCCESS file",
                    "success.show",
                    (
                        success_destination,
                        Arg.of(
                            "--job-id",
                            help="show this job: its record when _SUCCESS is absent or names another job",
                        ),
                        *store,
                    ),
                ),
                Command(
                    "verify",
                    "check a _SUCCESS file (exit 1 if not)",
                    "success.verify",
                    (
                        success_destination,
                        Arg.of(
                            "--job-id",
                            help="the job that must have committed (its record counts when _SUCCESS is "
                            "another job's)",
                        ),
                        Arg.of("--min-files", type=int, metavar="N", help="at least N files committed"),
                        Arg.of(
                            "--committer",
                            action="append",
                            metavar="NAME",
                            help="expected committer (repeat for any of)",
                        ),
                        Arg.of(
                            "--newer-than", type=duration, metavar="DURATION", help="written within DURATION"
                        ),
                        Arg.of(
                            "--partition",
                            action="append",
                            metavar="P",
                            help="a partition that must be listed",
                        ),
                        Arg.of("--allow-legacy", action="store_true", help="accept a 0-byte classic marker"),
                        Arg.of(
                            "--files",
                            action="store_true",
                            help="also check that every listed file is there with its size: one listing "
                            "of the destination merged with the job's file list (no request per file)",
                        ),
                        *store,
                    ),
                ),
            ),
        ),
        Group(
            "records",
            "per-job commit records under <destination>/_airflow_commit/",
            (
                Command("list", "list jobs with records, and which may go", "records.list_records", records),
                Command(
                    "prune",
                    "delete every file of the jobs older than --older-than but the --keep-newest newest, "
                    "and index the jobs kept that lack an index entry",
                    "records.prune",
                    (*records, *_DESTRUCTIVE),
                ),
                Command(
                    "reindex",
                    "write the records index entries that decided jobs lack (jobs from before the index)",
                    "records.reindex",
                    (
                        *_place(DESTINATION, "the destination whose records are indexed"),
                        Arg.of(
                            "--dry-run",
                            action="store_true",
                            help="report which jobs lack an entry, write nothing",
                        ),
                        *store,
                    ),
                ),
            ),
        ),
        Command(
            "doctor",
            "check that a store has what the committers rely on (exit 1 on any FAIL)",
            "doctor.doctor",
            (
                destination,
                Arg.of("--writers", type=positive, default=8, help="concurrent creates per race (default 8)"),
                Arg.of("--rounds", type=positive, default=3, help="races to run (default 3)"),
                Arg.of(
                    "--max-job-duration",
                    type=duration,
                    metavar="DURATION",
                    help="the longest job that writes to DESTINATION (e.g. 30h: the longest "
                    "execution_timeout of its tasks); FAIL if a lifecycle rule aborts incomplete uploads "
                    "sooner, WARN when not given and a rule applies",
                ),
                *store,
            ),
            description="Probe the store under a scratch prefix of DESTINATION (removed afterwards) for "
            "every property the committers rely on, and the bucket's lifecycle rules against the longest "
            "job: each PASS, WARN or FAIL, with its reason.",
        ),
        Command(
            "report",
            "what a commit did: its tasks, job-commit phases and partitions, read from its records",
            "report.report",
            (
                destination,
                Arg.of("--job-id", metavar="JOB_ID", help="the job to report (default: the most recent one)"),
                Arg.of(
                    "--html", metavar="FILE", help="also write the report as one self-contained HTML file"
                ),
                Arg.of(
                    "--page",
                    type=positive,
                    default=1,
                    help="page of the file list, 100 files each (default 1)",
                ),
                Arg.of(
                    "--partition-page",
                    type=positive,
                    default=1,
                    help="page of the partition table, 100 partitions each (default 1)",
                ),
                Arg.of("--limit", type=positive, default=20, help="recent commits listed (default 20)"),
                Arg.of(
                    "--after",
                    metavar="CURSOR",
                    help="list the commits older than those a previous list ended with (it prints the "
                    "cursor)",
                ),
                *store,
            ),
        ),
    )


_DESCRIPTION = (
    "List and abort pending uploads, clean temporary trees, check _SUCCESS, prune job records, "
    "report commits, check a store."
)
_EPILOG = (
    "Destructive commands ask first and refuse when nobody can answer (pass --yes or --dry-run). "
    "Errors are one line on stderr with exit status 2; a failed check or a declined prompt exits 1."
)


# The two parsers. ----------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """`airflow-commit`'s parser: also what the CLI reference is generated from. Each command's
    namespace has `handler`, the import path `cli.runner` runs."""
    parser = Parser(prog=PROG, description=_DESCRIPTION, epilog=_EPILOG)
    Arg.of("--version", action=_Version, help="print the package version and exit").add_to(parser)
    _add_subcommands(parser, _groups(), "group")
    return parser


def _add_subcommands(parser: argparse.ArgumentParser, items: Sequence[Group | Command], dest: str) -> None:
    subparsers = parser.add_subparsers(
        dest=dest, required=True, metavar="{" + ",".join(item.name for item in items) + "}"
    )
    for item in items:
        if isinstance(item, Group):
            group = subparsers.add_parser(item.name, help=item.help, description=item.help)
            _add_subcommands(group, item.commands, "command")
            continue
        command = subparsers.add_parser(item.name, help=item.help, description=item.description or item.help)
        for arg in item.args:
            arg.add_to(command)
        command.set_defaults(handler=_HANDLERS + item.handler)


def get_cli_commands() -> list[Any]:
    """The provider info's `cli` (Airflow 3.2+): `airflow commit-protocols ...`, the same commands
    as `airflow-commit`, each run through `cli.runner` (imported when it runs)."""
    from airflow.cli.cli_config import ActionCommand, GroupCommand
    from airflow.cli.cli_config import Arg as AirflowArg

    def airflow_command(item: Group | Command) -> Any:
        if isinstance(item, Group):
            return GroupCommand(
                name=item.name, help=item.help, subcommands=[airflow_command(c) for c in item.commands]
            )
        return ActionCommand(
            name=item.name,
            help=item.help,
            description=item.description,
            func=_run_later(_HANDLERS + item.handler),
            args=tuple(AirflowArg(arg.flags, **arg.options) for arg in item.args),
        )

    return [
        GroupCommand(
            name=AIRFLOW_GROUP,
            help="Commit protocols: " + _DESCRIPTION[0].lower() + _DESCRIPTION[1:],
            description=f"{_DESCRIPTION} {_EPILOG}",
            subcommands=[airflow_command(item) for item in _groups()],
        )
    ]


def _run_later(handler: str) -> Callable[[argparse.Namespace], None]:
    """Airflow's command function for `handler`: runs it as `airflow-commit` does (one-line errors)
    and exits with its status, which Airflow's `main` would otherwise drop."""

    def command(args: argparse.Namespace) -> None:
        from airflow_commit_provider.cli.runner import run

        args.handler = handler
        status = run(args, prog=f"airflow {AIRFLOW_GROUP}")
        if status:
            raise SystemExit(status)

    command.__name__ = handler.rpartition(".")[2]
    return command
