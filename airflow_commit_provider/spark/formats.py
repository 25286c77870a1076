"""Per-format file writers (pyarrow) and Spark's file-name suffixes.

- parquet: ``pyarrow.parquet.ParquetWriter``; batches are buffered up to ``parquet.block.size``
  bytes of Arrow memory and written as one row group, so row groups are large while memory stays
  bounded. Spark's schema goes into the footer (``org.apache.spark.sql.parquet.row.metadata``) as
  Spark writes it, so Spark reads back exactly the types written (byte, short, char...).
  Suffix ``.<codec>.parquet`` with parquet-mr's codec extensions (``.snappy``, ``.gz``, ``.zstd``,
  ``.lz4raw``, ``.br``; none for uncompressed); default codec: ``spark.sql.parquet.compression.codec``.
- orc: ``pyarrow.orc.ORCWriter``, stripes of ``orc.stripe.size``; suffix ``.<codec>.orc`` as
  Spark's OrcUtils names them; default codec ``spark.sql.orc.compression.codec`` (zstd in Spark 4).
- csv / json: each row arrives already encoded by Spark itself (``to_csv`` / ``to_json`` with the
  write's options, i.e. Spark's CSVOptions/JSONOptions and Spark's writers' formatting), so the
  files are exactly what ``spark.read.csv``/``spark.read.json`` expect with the same options. Lines
  end with ``lineSep`` (default ``\\n``); json is one object per line. csv files start with a
  header line when ``header`` is true, which is our default (Spark's is false) so that
  ``spark.read.csv(path, header=True)`` reads the column names back; every file gets the header,
  as Spark writes it. Suffix ``.csv``/``.json`` then the codec's (``.gz``, ``.bz2``), as Spark's
  CodecStreams names them.

Every writer writes into a :class:`CountingSink` around the task attempt's stream: the sink counts
the bytes (reported sizes are exact, never 0 - cf. HADOOP-17414) and never closes the attempt's
stream, which is closed (published into the attempt) only after the format writer closed cleanly.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

FORMATS = ("parquet", "orc", "csv", "json")

#: Spark codec name -> (pyarrow codec, file-name extension), per format family.
_PARQUET_CODECS = {
    "none": (None, ""),
    "uncompressed": (None, ""),
    "snappy": ("snappy", ".snappy"),
    "gzip": ("gzip", ".gz"),
    "zstd": ("zstd", ".zstd"),
    "lz4_raw": ("lz4", ".lz4raw"),
    "lz4raw": ("lz4", ".lz4raw"),
    "brotli": ("brotli", ".br"),
}
_ORC_CODECS = {
    "none": (None, ""),
    "uncompressed": (None, ""),
    "snappy": ("snappy", ".snappy"),
    "zlib": ("zlib", ".zlib"),
    "lz4": ("lz4", ".lz4"),
    "zstd": ("zstd", ".zstd"),
}
_TEXT_CODECS = {
    "none": (None, ""),
    "uncompressed": (None, ""),
    "gzip": ("gzip", ".gz"),
    "bzip2": ("bz2", ".bz2"),
}
_NOT_SUPPORTED = {
    ("parquet", "lz4"): "pyarrow writes LZ4_RAW, not Hadoop's LZ4 framing: use compression='lz4_raw'",
    ("parquet", "lzo"): "pyarrow cannot write LZO",
    ("orc", "lzo"): "pyarrow cannot write LZO",
}


@dataclass(frozen=True)
class FileFormat:
    name: str
    extension: str
    codecs: dict[str, tuple[str | None, str]]
    text: bool

    def resolve_codec(self, requested: str | None, default: str | None) -> tuple[str | None, str]:
        """(pyarrow codec, file suffix after ``c%03d``) for a Spark codec name."""
        name = (requested or default or "none").lower()
        if (self.name, name) in _NOT_SUPPORTED:
            raise ValueError(f"{self.name} compression {name!r}: {_NOT_SUPPORTED[(self.name, name)]}")
        if name not in self.codecs:
            raise ValueError(
                f"{self.name} compression {name!r} is not supported; choose one of {', '.join(self.codecs)}"
            )
        codec, codec_ext = self.codecs[name]
        suffix = f"{self.extension}{codec_ext}" if self.text else f"{codec_ext}{self.extension}"
        return codec, suffix


FILE_FORMATS = {
    "parquet": FileFormat("parquet", ".parquet", _PARQUET_CODECS, text=False),
    "orc": FileFormat("orc", ".orc", _ORC_CODECS, text=False),
    "csv": FileFormat("csv", ".csv", _TEXT_CODECS, text=True),
    "json": FileFormat("json", ".json", _TEXT_CODECS, text=True),
}


def file_format(name: str) -> FileFormat:
    try:
        return FILE_FORMATS[name.lower()]
    except KeyError:
        raise ValueError(f"unsupported format {name!r}: choose one of {', '.join(FORMATS)}") from None


class CountingSink(io.RawIOBase):
    """What pyarrow writes into: forwards to the attempt's stream and counts bytes; closing it
    leaves the attempt's stream open (the caller decides whether to publish or discard it)."""

    def __init__(self, stream: SupportsWrite[bytes]):
        super().__init__()
        self._stream = stream
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = data if isinstance(data, bytes) else bytes(data)
        self._stream.write(chunk)
        self.count += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.count


class FormatWriter:
    """Writes record batches of the data columns into one file."""

    def __init__(self, sink: CountingSink):
        self.sink = sink
        self.rows = 0

    @property
    def bytes_written(self) -> int:
        return self.sink.count

    @property
    def buffered_bytes(self) -> int:
        """Arrow bytes held in memory and not yet encoded into the file."""
        return 0

    def write(self, batch: pa.RecordBatch) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class ParquetFileWriter(FormatWriter):
    def __init__(self, sink: CountingSink, schema: pa.Schema, codec: str | None, row_group_bytes: int):
        super().__init__(sink)
        import pyarrow.parquet as pq

        self._writer = pq.ParquetWriter(sink, schema, compression=codec or "none")
        self._row_group_bytes = row_group_bytes
        self._buffer: list[pa.RecordBatch] = []
        self._buffered = 0

    @property
    def buffered_bytes(self) -> int:
        return self._buffered

    def write(self, batch: pa.RecordBatch) -> None:
        self._buffer.append(batch)
        self._buffered += batch.nbytes
        self.rows += batch.num_rows
        if self._buffered >= self._row_group_bytes:
            self.flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        table = pa.Table.from_batches(self._buffer)
        self._buffer = []
        self._buffered = 0
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))

    def close(self) -> None:
        self.flush()
        self._writer.close()


class OrcFileWriter(FormatWriter):
    def __init__(self, sink: CountingSink, schema: pa.Schema, codec: str | None, stripe_bytes: int):
        super().__init__(sink)
        from pyarrow import orc

        self._schema = schema
        self._writer = orc.ORCWriter(sink, compression=codec or "uncompressed", stripe_size=stripe_bytes)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write(pa.Table.from_batches([_unsliced_structs(batch)]))
        self.rows += batch.num_rows

    def close(self) -> None:
        if self.rows == 0:
            self._writer.write(self._schema.empty_table())
        self._writer.close()


def _unsliced_structs(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with its struct columns copied if they are slices: pyarrow's ORC writer ignores a
    top-level struct column's offset and writes the rows before the slice (checked with pyarrow 26)."""
    if not any(pa.types.is_struct(column.type) and column.offset for column in batch.columns):
        return batch
    import pyarrow.compute as pc

    positions = pa.array(range(batch.num_rows), pa.int64())
    columns = [
        pc.take(column, positions) if pa.types.is_struct(column.type) and column.offset else column
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


class TextFileWriter(FormatWriter):
    """Lines already encoded by Spark (csv/json), optionally behind a header and compressed."""

    def __init__(self, sink: CountingSink, codec: str | None, line_sep: str, header: str | None):
        super().__init__(sink)
        self._line_sep = line_sep
        self._compressed: Any = None
        self._out: Any = sink
        if codec:
            self._compressed = pa.CompressedOutputStream(pa.PythonFile(sink, mode="w"), codec)
            self._out = self._compressed
        if header is not None:
            self._out.write((header + line_sep).encode("utf-8"))

    def write(self, batch: pa.RecordBatch) -> None:
        lines = batch.column(0).to_pylist()
        if lines:
            self._out.write((self._line_sep.join(lines) + self._line_sep).encode("utf-8"))
        self.rows += batch.num_rows

    def close(self) -> None:
        if self._compressed is not None:
            self._compressed.close()


def open_format_writer(
    format: str,
    sink: CountingSink,
    schema: pa.Schema,
    codec: str | None,
    *,
    line_sep: str = "\n",
    header: str | None = None,
    row_group_bytes: int = 64 * 1024 * 1024,
    stripe_bytes: int = 64 * 1024 * 1024,
) -> FormatWriter:
    if format == "parquet":
        return ParquetFileWriter(sink, schema, codec, row_group_bytes)
    if format == "orc":
        return OrcFileWriter(sink, schema, codec, stripe_bytes)
    if format in ("csv", "json"):
        return TextFileWriter(sink, codec, line_sep, header if format == "csv" else None)
    raise ValueError(f"unsupported format {format!r}")
