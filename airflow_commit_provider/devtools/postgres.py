"""Debian's PostgreSQL as a private cluster, a development tool like the embedded S3: Airflow's
metadata database in tests/deployment, the shared Hive metastore's database in tests/tables and
behind the Thrift metastore of tests and bench (``devtools.hive_metastore.HiveMetastoreService``).

`Postgres` runs ``initdb`` on a temporary directory and ``pg_ctl`` on a free loopback port with its
socket in that directory (no system service, nothing left behind after `stop`); `create_database`
gives a database owned by a user of its own, with a random password that only ever travels on
``psql``'s stdin, never on a command line.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from airflow_commit_provider.devtools.ports import free_loopback_ports


class PostgresError(RuntimeError):
    """The cluster could not be set up (the failing step and its output are in the message)."""


def postgres_bindir() -> Path:
    """Debian's newest ``/usr/lib/postgresql/<version>/bin``, else the directory of ``initdb`` on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise PostgresError(
        "PostgreSQL's initdb was not found: install Debian's postgresql (scripts/bootstrap.sh does, as root)"
    )


@dataclass(frozen=True)
class Database:
    """One database of the cluster and the user that owns it."""

    name: str
    user: str
    password: str
    port: int

    @property
    def sqlalchemy_url(self) -> str:
        """With the password in it: for an environment variable, never a command line or a log."""
        return f"postgresql+psycopg2://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.name}"

    @property
    def jdbc_url(self) -> str:
        """Without credentials (the JDBC driver takes them apart)."""
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{self.name}"


class Postgres:
    """A private PostgreSQL cluster on 127.0.0.1; `create_database` once `start` has returned."""

    def __init__(self) -> None:
        self.bindir = postgres_bindir()
        # Its own directory outside pytest's (0700) tree: the server may run as the postgres user.
        self.root = Path(os.environ.get("TMPDIR", "/tmp")) / f"airflow-commit-pg-{secrets.token_hex(6)}"
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        [self.port] = free_loopback_ports(1)
        self._started = False

    def __enter__(self) -> Postgres:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _as_owner(self, command: list[str]) -> list[str]:
        """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def _run(self, command: list[str], what: str, stdin: str | None = None) -> None:
        done = subprocess.run(
            self._as_owner(command), input=stdin, capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode:
            raise PostgresError(
                f"{what} failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
            )

    def start(self) -> Postgres:
        self.root.mkdir(mode=0o700)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        initdb = [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres"]
        self._run(
            [*initdb, "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"], "initdb"
        )
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c full_page_writes=off"
        self._started = True
        pg_ctl = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options]
        self._run([*pg_ctl, "-w", "-t", "60", "start"], "pg_ctl start")
        return self

    def create_database(self, name: str) -> Database:
        """A new database `name`, owned by a new user `name` with a random password."""
        database = Database(name=name, user=name, password=secrets.token_urlsafe(18), port=self.port)
        psql = str(self.bindir / "psql") if (self.bindir / "psql").exists() else "psql"
        # The password travels on stdin, never on a command line.
        sql = (
            f"CREATE USER {name} PASSWORD '{database.password}';\n"
            f"CREATE DATABASE {name} OWNER {name} ENCODING 'UTF8';\n"
        )
        connect = [psql, "-h", str(self.root), "-p", str(self.port), "-U", "postgres"]
        self._run(
            [*connect, "-v", "ON_ERROR_STOP=1", "-q", "-f", "-"],
            f"creating the {name} database",
            stdin=sql,
        )
        return database

    def stop(self) -> None:
        if self._started:
            with contextlib.suppress(Exception):
                self._run(
                    [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                    "pg_ctl stop",
                )
            pid_file = self.data / "postmaster.pid"
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
            self._started = False
        shutil.rmtree(self.root, ignore_errors=True)
