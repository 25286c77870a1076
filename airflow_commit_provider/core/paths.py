"""Store paths: one value type for `file://`, `hdfs://`, `s3://` and `s3a://` addresses, and
`Destination`, where a job writes.

Two ways in, never confused: a path a user gives (`parse`) is taken literally, as Spark,
Hadoop and the AWS CLI take it; a URI read from a manifest or `_SUCCESS` (`from_uri`) is
percent-decoded, because those files store `uri()`, where spaces, `%`, `#`, `?`, unicode and
`=` are encoded (HADOOP-17112).

The words, as the API, the CLI and the docs use them: a **destination** is where a job writes (a
table's root folder), a **scope** what a cleanup acts on, a **path** one stored file or object, and
a **location** only a catalog's partition location.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

from airflow_commit_provider.core.hadoop_conf import hadoop_conf_value

#: Characters left unencoded in URIs; everything else (space, %, non-ASCII, ...) is encoded.
_URI_SAFE = "/=:@!$&'()*+,;~-._"

S3_SCHEMES = ("s3", "s3a", "s3n")
HDFS_SCHEME = "hdfs"
#: The schemes this package opens a store for (`core.store.open_store`).
STORE_SCHEMES = ("file", HDFS_SCHEME, *S3_SCHEMES)
#: Where `hdfs:///t` finds its NameNode, as Hadoop does: the default filesystem of the client conf.
DEFAULT_FS = ("core-site.xml", "fs.defaultFS")
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: A stored URI as `uri()` writes it: no query, fragment, space or control character, a plain
#: authority. Such a URI is split without `urlsplit`, which costs more than the rest of reading a
#: manifest entry; anything else still goes through `urlsplit`.
_PLAIN_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([A-Za-z0-9._:@-]*)((?:/[^?#\x00-\x20\x7f]*)?)\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: What a bucket may be called: `uri()` writes it unencoded, so it must read back as the same
#: authority (a `[` would read as an IPv6 host, a space or `%` as something else).
_BUCKET = re.compile(r"[A-Za-z0-9._:@-]+")


class InvalidPathError(ValueError):
    """A path as written cannot be parsed into a store path."""


@dataclass(frozen=True, order=True)
class StorePath:
    """A path in a store: one file or object, or a folder (a prefix of keys).

    `scheme` is `file`, `hdfs` or an S3 scheme; `bucket` is empty for local files and the NameNode's
    `host:port` on HDFS; `key` is the decoded path inside the bucket (or HDFS namespace) without a
    leading slash (local paths keep theirs).
    """

    scheme: str
    bucket: str
    key: str

    @classmethod
    def parse(cls, path: str | os.PathLike[str] | StorePath) -> StorePath:
        """A path as a user writes it: `s3://b/k`, `s3a://b/k`, `hdfs://nn:8020/p`, `hdfs:///p` (on
        the default filesystem, `default_hdfs_namenode`), `file:///p` or a plain path.

        Everything after the scheme and bucket is taken literally, as Spark and Hadoop's
        `Path(String)`, the AWS CLI and boto3 take it: `%41`, `%`, `#`, `?`, spaces and unicode
        are part of the key. `str(path)` gives text this parses back to the same path.
        """
        if isinstance(path, StorePath):
            return path
        text = os.fspath(path)
        if not text:
            raise InvalidPathError(
                "empty path: give an s3://, s3a://, hdfs:// or file:// URL or a local path"
            )
        match = _URL_SCHEME.match(text)
        if match is None:  # a plain path, even one with ':' or '%' in it
            if not text.isascii():
                _check_encodable(text, "file", text)
            return cls("file", "", _normalise_local(os.path.abspath(text)))
        scheme, rest = match.group(1).lower(), text[match.end() :]
        authority, _, key = rest.partition("/")
        return cls._checked(scheme, authority, key, text)

    @classmethod
    def from_uri(cls, uri: str) -> StorePath:
        """A URI as manifests, pendingsets, upload records and `_SUCCESS` store it: percent-decoded.

        Those files hold `uri()` strings (HADOOP-17112), so special characters arrive encoded
        and a `#` or `?` in a key never reads as a fragment or query.
        """
        plain = _PLAIN_URI.match(uri)
        if plain is not None:
            scheme, authority, path = plain.groups()
            decoded = unquote(path, errors="surrogateescape") if "%" in path else path
            return cls._checked(scheme.lower(), authority, decoded, uri)
        if not uri or _URL_SCHEME.match(uri) is None:
            raise InvalidPathError(f"not a URI: {uri!r}")
        if _CONTROL.search(uri):  # `urlsplit` would silently drop a tab or newline from the key
            raise InvalidPathError(f"a stored URI must not have raw control characters: {uri!r}")
        try:
            parts = urlsplit(uri)
        except ValueError as error:  # e.g. "Invalid IPv6 URL" for a `[` in the authority
            raise InvalidPathError(f"not a URI: {uri!r}: {error}") from None
        if parts.query or parts.fragment:
            raise InvalidPathError(f"a stored URI must not have a query or fragment: {uri!r}")
        return cls._checked(
            parts.scheme.lower(), parts.netloc, unquote(parts.path, errors="surrogateescape"), uri
        )

    @classmethod
    def _checked(cls, scheme: str, authority: str, path: str, text: str) -> StorePath:
        if not path.isascii():
            _check_encodable(path, scheme, text)
        if scheme == "file":
            if authority not in ("", "localhost"):
                raise InvalidPathError(f"file URL with a host is not supported: {text!r}")
            return cls("file", "", _normalise_local("/" + path.lstrip("/")))
        if scheme in S3_SCHEMES:
            if not authority:
                raise InvalidPathError(f"S3 URL has no bucket: {text!r}")
            if not _BUCKET.fullmatch(authority):
                raise InvalidPathError(
                    f"S3 bucket {authority!r} in {text!r} is not a bucket name: use letters, digits, '.', '-' or '_'"
                )
            return cls(scheme, authority, path.strip("/"))
        if scheme == HDFS_SCHEME:
            namenode = authority or default_hdfs_namenode(text)
            if not _BUCKET.fullmatch(namenode):
                raise InvalidPathError(f"HDFS NameNode {namenode!r} in {text!r} is not a host or host:port")
            return cls(scheme, namenode, path.strip("/"))
        raise InvalidPathError(
            f"unsupported scheme {scheme!r} in {text!r}: use s3://, s3a://, hdfs:// or file://"
        )

    @property
    def is_local(self) -> bool:
        return self.scheme == "file"

    @property
    def name(self) -> str:
        return self.key.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> StorePath:
        head = self.key.rstrip("/").rsplit("/", 1)[0] if "/" in self.key.strip("/") else ""
        if self.is_local:
            return StorePath(self.scheme, "", head or "/")
        return StorePath(self.scheme, self.bucket, head)

    def join(self, *relative: str) -> StorePath:
        """Append relative path elements; `..` and absolute elements are refused."""
        key = self.key
        for element in relative:
            for part in element.split("/"):
                if part in ("", "."):
                    continue
                if part == "..":
                    raise InvalidPathError(f"'..' is not allowed in a relative path: {element!r}")
                key = f"{key.rstrip('/')}/{part}" if key else part
        return StorePath(self.scheme, self.bucket, key)

    def dir_prefix(self) -> str:
        """The key prefix of everything under this directory, ending in `/` (the dataset1/dataset10 rule)."""
        stripped = self.key.strip("/") if not self.is_local else self.key.rstrip("/")
        return f"{stripped}/" if stripped else ("/" if self.is_local else "")

    def is_under(self, directory: StorePath) -> bool:
        """True if this path is inside `directory` (directory boundary, never a plain prefix match)."""
        if scheme_family(self.scheme) != scheme_family(directory.scheme) or self.bucket != directory.bucket:
            return False
        return self.key.startswith(directory.dir_prefix())

    def relative_to(self, directory: StorePath) -> str:
        if not self.is_under(directory):
            raise InvalidPathError(f"{self} is not under {directory}")
        return self.key[len(directory.dir_prefix()) :]

    def uri(self) -> str:
        """Percent-encoded URI, the form stored in manifests and `_SUCCESS`."""
        if self.is_local:  # a file name's undecodable bytes (surrogateescape) as themselves
            return "file://" + quote(self.key, safe=_URI_SAFE, errors="surrogateescape")
        return f"{self.scheme}://{self.bucket}/" + quote(self.key, safe=_URI_SAFE)

    def __str__(self) -> str:
        if self.is_local:
            return f"file://{self.key}"
        return f"{self.scheme}://{self.bucket}/{self.key}"


@dataclass(frozen=True)
class Destination:
    """Where a job writes (a table's root folder), parsed once when its write is planned.

    Hadoop's own committers (``engine="hadoop"``) write to any Hadoop filesystem (``hdfs://``,
    ``abfss://``, ``gs://``...), of which this package's stores open S3, HDFS and local files: the
    URI is kept as given, and the store root is there only where one of ours opens it. Everything
    downstream of a plan reads this value instead of parsing the string again.
    """

    uri: str
    """As given for Hadoop's committers; for ours ``str(root)``, the spelling every reader parses back."""
    _root: StorePath | None = field(repr=False)

    @classmethod
    def parse(
        cls, given: str | os.PathLike[str] | StorePath, *, any_hadoop_filesystem: bool = False
    ) -> Destination:
        """`given` read once; `any_hadoop_filesystem` (Hadoop's committers) also takes URIs of
        filesystems this package opens no store for. An `InvalidPathError` names what is wrong."""
        if isinstance(given, StorePath):
            return cls(str(given), given)
        text = os.fspath(given)
        if any_hadoop_filesystem and _scheme_of(text) not in STORE_SCHEMES:
            return cls(text, None)
        root = StorePath.parse(text)
        return cls(text if any_hadoop_filesystem else str(root), root)

    @property
    def scheme(self) -> str:
        """The URI's scheme, lower case; ``file`` for a path without one (as Hadoop's default fs here)."""
        return _scheme_of(self.uri)

    @property
    def in_store(self) -> bool:
        """Whether one of this package's stores opens it (S3, HDFS or local files)."""
        return self._root is not None

    @property
    def root(self) -> StorePath:
        """The destination in its store; an `InvalidPathError` for a filesystem only Hadoop opens."""
        if self._root is None:
            raise InvalidPathError(
                f"destination {self.uri!r} is on {self.scheme}://, which only Hadoop's committers write: "
                "its _SUCCESS, jobs and files can be checked here only on s3://, s3a://, hdfs:// or file://"
            )
        return self._root

    def __str__(self) -> str:
        return self.uri


def _scheme_of(text: str) -> str:
    match = _URL_SCHEME.match(text)
    return match.group(1).lower() if match else "file"


def default_hdfs_namenode(text: str, environ: Mapping[str, str] | None = None) -> str:
    """The NameNode (`host:port`) of `hdfs:///...`: the client conf's ``fs.defaultFS``, as Hadoop
    resolves it, so a path has one spelling whichever way it was written (`_SUCCESS` and Hadoop's
    manifests name files with the full URI)."""
    default_fs, source = hadoop_conf_value(*DEFAULT_FS, environ)
    if not default_fs:
        raise InvalidPathError(
            f"{text!r} names no NameNode and there is no fs.defaultFS in {source}: "
            "write hdfs://host:port/path or set HADOOP_CONF_DIR"
        )
    scheme, _, rest = default_fs.partition("://")
    namenode = rest.split("/", 1)[0]
    if scheme.lower() != HDFS_SCHEME or not namenode:
        raise InvalidPathError(
            f"{text!r}: fs.defaultFS in {source} is {default_fs!r}, not an hdfs:// NameNode"
        )
    return namenode


def scheme_family(scheme: str) -> str:
    """One name per store family: `s3`, `s3a` and `s3n` name the same objects."""
    return "s3" if scheme in S3_SCHEMES else scheme


def _check_encodable(path: str, scheme: str, text: str) -> None:
    """A key is UTF-8 (S3's rule), a local name what the filesystem can hold: its undecodable bytes
    arrive as surrogateescape characters, but any other lone surrogate names no file or key."""
    try:
        path.encode("utf-8", "surrogateescape" if scheme == "file" else "strict")
    except UnicodeEncodeError:
        raise InvalidPathError(f"{text!r} has a lone surrogate, which no key or file name can hold") from None


def _normalise_local(path: str) -> str:
    """One spelling per local file: POSIX lets `normpath` keep exactly two leading slashes, which
    Linux reads as one; `//data/t` kept as such printed as `file:////data/t`, read back as `/data/t`."""
    normalised = os.path.normpath(path)
    return "/" + normalised.lstrip("/") if normalised.startswith("//") else normalised


def same_path(a: StorePath, b: StorePath) -> bool:
    """True if both name the same object, treating `s3`/`s3a`/`s3n` as one scheme."""
    return (
        a.bucket == b.bucket
        and a.key.strip("/") == b.key.strip("/")
        and scheme_family(a.scheme) == scheme_family(b.scheme)
    )


def is_hidden(relative: str) -> bool:
    """Whether a path relative to a table is hidden from its readers, as Spark's and Hadoop's file
    listings hide it: one of its parts starts with `_` or `.` (`_SUCCESS`, `_airflow_commit/`,
    `_temporary/`, `.part-0.crc`)."""
    return any(part.startswith(("_", ".")) for part in relative.split("/"))
