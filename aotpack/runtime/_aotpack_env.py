"""Every environment variable the runtime reads or sets, in one place: those a user sets, and those through which a
process passes what it set up to the processes it starts (Inductor's compile workers, a recorded program's workers),
which inherit the environment and nothing else.

A runtime module (runtime/__init__.py says what that means): standard library only."""

# A user's, read by a generated package's __init__ at import (codegen/python.py writes these names into it)
AUTOTUNE = "AOTPACK_AUTOTUNE"  # 1 (per bucket) or key: runtime autotuning switched on at import
AUTOTUNE_CACHE = "AOTPACK_AUTOTUNE_CACHE"  # its cache file, shared between processes
WARN_CLASS_MISSES = "AOTPACK_WARN_CLASS_MISSES"  # 1: warn each class miss's first call
REPORT = "AOTPACK_REPORT"  # a folder: stats() written there at exit, a file per process
# aotpack rehearse: every activate() of the rehearsed program lists what compiles (fallback="jit"), whatever it asks,
# so that the rehearsal names each compilation a served program would meet, not the first alone
REHEARSAL = "AOTPACK_REHEARSAL"

# activate(): set in its process, inherited by those it starts (_aotpack_guard)
TRITON_MANAGER = "TRITON_CACHE_MANAGER"  # Triton's: the cache manager class (MODULE:CLASS), read on every lookup
FALLBACK = "AOTPACK_FALLBACK"  # error | jit: what a miss does, in this process and those it starts
PROGRAMS_MANAGER = "AOTPACK_CACHE_MANAGER"  # the manager the program had (MODULE:CLASS), serving behind the guard
CACHE_ENTRIES = "AOTPACK_CACHE_ENTRIES"  # the packages' copies of Triton cache entries: folders, os.pathsep between
# fallback="jit": the folder where the processes the program starts (Inductor's compile workers) list what they
# compiled, a file each, so that the activating process's coverage() and AOTPACK_REPORT hold it
COMPILED_DIR = "AOTPACK_COMPILED_DIR"

# aotpack record: set for the recorded program (record/program.py), read by the agent in each of its processes
RECORD_DIR = "AOTPACK_RECORD_DIR"  # the events folder
RECORD_RUN = "AOTPACK_RECORD_RUN"  # which run of the recorded program this is (record may run it again)
RECORD_TESTED = "AOTPACK_RECORD_TESTED"  # the Triton minor releases aotpack is tested with: X.Y,X.Y,...
RECORDED_MANAGER = "AOTPACK_RECORDED_CACHE_MANAGER"  # the manager the recorded program had (MODULE:CLASS)


def read_named(path: str, limit: int, one_name: bool = False) -> bytes:
    """A file a variable above (or an argument, or a cache's group) names, read without blocking and within
    ``limit`` bytes: a regular file only (a FIFO, a device or a folder is refused unread: a wrong name costs no wait
    and no unbounded read); ``one_name``: not a link either, and no hard link (a cache entry's file, which a group
    planted in a cache could name anywhere). OSError, or ValueError past ``limit``, otherwise. (The runtime's twin of
    aotpack's values.open_regular: a served process may not have aotpack to import.)"""
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if one_name else 0))
    with os.fdopen(fd, "rb") as f:
        found = os.fstat(f.fileno())
        if not stat.S_ISREG(found.st_mode) or (one_name and found.st_nlink != 1):
            raise OSError(f"{path} is not a plain file (a link, a device, a folder, or a file of two names)")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes")
    return data
