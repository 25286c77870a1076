"""Linux's ``renameat2(2)`` through glibc (2.28 and later), for the two renames `os.rename` cannot
make: one that refuses an existing destination (``RENAME_NOREPLACE``) and one that swaps two paths
(``RENAME_EXCHANGE``), each atomic in the kernel.

Where it is missing (another OS, an older C library) or the filesystem does not take the flag
(``EINVAL``: NFS, some FUSE filesystems), `renameat2` says so and changes nothing: the caller falls
back to what `os` offers.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
#: ``AT_FDCWD``: relative paths are taken from the working directory, as `os.rename` takes them.
_AT_FDCWD = -100
#: What the kernel or the C library answer for a call or a flag they do not have.
_UNSUPPORTED = frozenset({errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP})


def _load() -> Callable[..., int] | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_RENAMEAT2 = _load()
#: Whether the C library has renameat2 (a filesystem may still refuse a flag: `renameat2` says so).
AVAILABLE = _RENAMEAT2 is not None


def renameat2(source: str, dest: str, flags: int) -> bool:
    """Rename `source` to `dest` with `flags`: True once done, False where renameat2 or the flag is
    not supported (nothing changed); an `OSError` (``FileExistsError``, ``FileNotFoundError``...)
    for any other refusal, as `os.rename` raises them."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(dest), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), source, None, dest)
