"""The folders a served process loads back from what it wrote there, made this user's alone.

torch reads back what ``activate()`` loads into Inductor's cache (compiled graphs and Dynamo's profile: pickles,
which run code as they load), and its default cache folder is ``torchinductor_<user>`` in the system's temp folder,
a name any local user can predict and create first: whoever owns that folder can plant or swap what the served
process unpickles. Before the recorded caches go into it, Inductor's cache folder is checked to be this user's
alone (owned by this user, a folder, writable by no one else); the default one is made so where it does not exist
yet, and where it is not this user's alone the process uses a folder it makes for itself (``tempfile.mkdtemp``:
mode 0700, a name no one predicts) for as long as it is activated. A folder the program named
(``TORCHINDUCTOR_CACHE_DIR``, other than the default, which torch itself writes into the variable once it has
looked for its cache) is the program's choice: where it is not private the recorded caches are not loaded, and a
warning says why.

A runtime module (runtime/__init__.py says what that means): standard library only; torch's default folder is
asked of torch, which a process serving recorded caches has imported."""

from __future__ import annotations

import os
import stat
import tempfile
import threading

CACHE_DIR = "TORCHINDUCTOR_CACHE_DIR"


class _Folders:
    """Inductor's cache folder as ``activate()`` set it (``made``: the folder it made for this process; ``set``:
    whether the environment names it now; ``before``: what the environment named before), which ``reset()`` gives
    back."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.made: str | None = None
        self.set = False
        self.before: str | None = None

    def reset(self) -> None:
        with self.lock:
            if self.set and os.environ.get(CACHE_DIR) == self.made:
                if self.before is None:
                    os.environ.pop(CACHE_DIR, None)
                else:
                    os.environ[CACHE_DIR] = self.before
            self.set = False


_state = _Folders()


def reset() -> None:
    """Give back the program's Inductor cache folder (deactivate())."""
    _state.reset()


def not_private(path: str) -> str | None:
    """Why ``path`` is not a folder of this user's alone (None where it is): made now (mode 0700) where nothing is
    there; else a folder, or a link of this user's to one, owned by this user and writable by no one else."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        try:
            os.makedirs(path, mode=0o700)
        except FileExistsError:  # (made by someone else since)
            return not_private(path)
        except OSError as exc:
            return f"it cannot be made ({exc.strerror})"
        return None
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if stat.S_ISLNK(found.st_mode):
        if found.st_uid != os.getuid():
            return f"it is a link another user (uid {found.st_uid}) owns"
        try:
            found = os.stat(path)
        except OSError as exc:
            return f"it is a link to nothing readable ({exc.strerror})"
    if not stat.S_ISDIR(found.st_mode):
        return "it is not a folder"
    return others_write(found)


def others_write(found: os.stat_result, sticky: bool = False) -> str | None:
    """Why what another user wrote could be in a file or folder of this status (None: only this user could have
    written it): another user owns it, or others may write it (its group or everyone); ``sticky``: a folder with
    the sticky bit keeps others from replacing what is in it (what a report folder such as /tmp may be)."""
    if found.st_uid != os.getuid():
        return f"another user (uid {found.st_uid}) owns it"
    if found.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (sticky and found.st_mode & stat.S_ISVTX):
        return f"other users can write it (mode {stat.S_IMODE(found.st_mode):o})"
    return None


def inductor_cache(default: str) -> str | None:
    """Make Inductor's cache folder this user's alone before the recorded caches go into it (``default``: torch's
    default folder). None where the caches can be loaded; else why not (the program's own folder is not private).
    Where torch's default folder is not this user's alone, the process gets a folder of its own, and a
    RuntimeWarning says so."""
    with _state.lock:
        named = os.environ.get(CACHE_DIR)
        # the program's choice: not torch's default, which torch's cache_dir() writes into the variable when asked
        if named is not None and os.path.abspath(named) != os.path.abspath(default) and named != _state.made:
            why = not_private(os.path.abspath(named))
            return None if why is None else (
                f"Inductor's cache folder {named} ({CACHE_DIR}) is not this user's alone: {why}; torch would "
                "unpickle what another user put there, so the recorded caches are not loaded (name a folder of yours)"
            )  # fmt: skip
        if _state.made is None:
            why = not_private(default)
            if why is None:
                return None
            _state.made = tempfile.mkdtemp(prefix="torchinductor_aotpack_")
            import warnings

            warnings.warn(f"Inductor's default cache folder {default} is not this user's alone ({why}): another "
                          f"user could plant what torch loads from it; this process uses {_state.made} instead (set "
                          f"{CACHE_DIR} to a folder of yours to keep a cache across runs)", RuntimeWarning,
                          stacklevel=4)  # fmt: skip
        if not _state.set:
            _state.before = named
        os.environ[CACHE_DIR] = _state.made
        _state.set = True
        return None
