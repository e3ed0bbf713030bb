"""Files an export writes and an import reads, handled so that a planted file cannot steer
them: exports never overwrite a file or write through a symlink unless forced, manifest
entries name files inside the export's directory only, and every read is bounded (a line
or a cell longer than ``MAX_RECORD_BYTES`` is refused before it is held in memory)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from stash_pipeline import errors

#: the longest line (JSONL), CSV block or Parquet column chunk a reader holds at once: far
#: above a row at the content and metadata caps, far below what would exhaust memory
MAX_RECORD_BYTES = 64 * 1024 * 1024


def regular_file(path: str | Path) -> Path:
    """``path`` if it names an existing regular file, else InvalidInput naming the path.

    Devices, FIFOs and sockets are refused before anything reads them: ``/dev/zero`` has
    no end and a FIFO may never deliver one.
    """
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except FileNotFoundError:
        raise errors.InvalidInput(f"no such file: {file}") from None
    except OSError as exc:
        raise errors.InvalidInput(f"cannot read {file}: {exc.strerror or type(exc).__name__}") from None
    if not stat.S_ISREG(mode):
        raise errors.InvalidInput(f"{file} is not a regular file (a device, FIFO or directory cannot be imported)")
    return file


def parquet(path: Path) -> Any:
    """A Parquet file, refused when a row group is over ``MAX_RECORD_BYTES`` (before any is read)."""
    import pyarrow.parquet as pq

    reader = pq.ParquetFile(path)
    if any(reader.metadata.row_group(g).total_byte_size > MAX_RECORD_BYTES
           for g in range(reader.metadata.num_row_groups)):
        raise errors.InvalidInput(f"{path.name} holds a row group over {MAX_RECORD_BYTES} bytes")
    return reader


def csv(path: Path, **convert: Any) -> Any:
    """A streaming CSV reader whose block (the most one read holds) is ``MAX_RECORD_BYTES``:
    a row longer than a block is refused, not grown into."""
    import pyarrow.csv as pa_csv

    return pa_csv.open_csv(path, read_options=pa_csv.ReadOptions(block_size=MAX_RECORD_BYTES),
                           convert_options=pa_csv.ConvertOptions(**convert))


def create(path: Path, *, force: bool = False) -> IO[bytes]:
    """A new file opened for writing; an existing file or symlink is refused unless ``force``
    (then it is replaced, never written through)."""
    if path.is_symlink() or path.exists():
        if not force:
            raise errors.InvalidInput(f"{path} already exists; pass --force to replace it")
        if path.is_dir() and not path.is_symlink():
            raise errors.InvalidInput(f"{path} is a directory")
        path.unlink()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        raise errors.InvalidInput(f"cannot write {path}: {exc.strerror or type(exc).__name__}") from None
    return os.fdopen(fd, "wb")


def directory(path: Path, *, force: bool = False) -> Path:
    """An empty directory to export into (created when missing); a symlink or a non-empty
    directory is refused unless ``force``."""
    if path.is_symlink() and not force:
        raise errors.InvalidInput(f"{path} is a symlink; pass --force to export there anyway")
    if path.exists() and (not path.is_dir() or (any(path.iterdir()) and not force)):
        raise errors.InvalidInput(f"{path} exists and is not an empty directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise errors.InvalidInput(f"cannot create {path}: {exc.strerror or type(exc).__name__}") from None
    return path


def inside(folder: Path, name: object, label: str) -> Path:
    """The file ``name`` of a manifest entry, which must be a plain file name in ``folder``."""
    if not isinstance(name, str) or not name or name in (".", "..") or Path(name).name != name or "\\" in name:
        raise errors.InvalidInput(f"the manifest entry for {label} does not name a file in the export directory")
    file = folder / name
    if file.is_symlink() or not file.resolve().is_relative_to(folder.resolve()):
        raise errors.InvalidInput(f"the manifest entry for {label} leaves the export directory")
    return file


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def lines(path: Path, limit: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a file, never holding more than ``limit`` bytes of one line."""
    limit = limit or MAX_RECORD_BYTES
    with path.open("rb") as handle:
        number = 0
        while line := handle.readline(limit + 1):
            number += 1
            if len(line) > limit:
                raise errors.InvalidInput(f"{path.name} line {number} is longer than {limit} bytes")
            yield number, line
