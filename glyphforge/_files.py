"""File helpers every layer shares: hashing a file, atomic replacement, and modes that follow the umask.

Files and directories glyphforge creates get the modes a plain ``open``/``mkdir``
would give them (``0o666``/``0o777`` less the umask; a directory in a setgid
directory stays setgid), also the temporary ones that ``tempfile`` makes owner-only
and that become entries by renaming: a data dir shared by a group (``chmod 2775``,
umask 002) is readable and writable by every member.

This module imports nothing from glyphforge but `glyphforge._checks` and `glyphforge.errors`, so anything may use it.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

from glyphforge._checks import PathLike
from glyphforge.errors import StorageError

try:
    import fcntl
except ImportError:  # not POSIX: staging files are not locked, and none is removed as abandoned
    fcntl = None  # type: ignore[assignment]

CHUNK_BYTES = 1 << 22


class Digest(Protocol):
    """What :func:`hash_file` feeds: anything with ``update(bytes)``, e.g. a ``hashlib`` object."""

    def update(self, data: bytes, /) -> None: ...


DigestT = TypeVar("DigestT", bound=Digest)


def hash_file(path: PathLike, digest: DigestT) -> DigestT:
    """Feed a file's bytes to ``digest``, read in chunks (never whole into memory), and return it.

    Parameters
    ----------
    path
        The file to read.
    digest
        A hash object such as ``hashlib.sha256()``; one already fed a prefix (a git blob
        header) continues from it.

    Returns
    -------
    The same ``digest``, fed every byte of the file: call ``.hexdigest()`` on it.
    """
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest


def sha256_file(path: PathLike) -> str:
    """Return the hex sha256 of a file's bytes, read in chunks (never whole into memory)."""
    return hash_file(path, hashlib.sha256()).hexdigest()


def file_stamp(status: os.stat_result) -> dict[str, int]:
    """What tells a file's bytes apart without reading them: its size, modification and change times, and inode.

    A record may skip re-hashing a file only while its stamp is unchanged. Size and modification time
    alone are not enough: a user keeps them on other bytes (``touch -r``, ``cp -p``), but cannot set the
    change time, and a file put in place by a copy or a rename changes it (or the inode).
    """
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, "ctime_ns": status.st_ctime_ns,
            "inode": status.st_ino}


def current_umask() -> int:
    """Return this process's umask (read from ``/proc`` on Linux, else set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no other way to read it; restored on the next line
    os.umask(mask)
    return mask


def follow_umask(path: PathLike) -> None:
    """Give ``path`` (created owner-only by ``tempfile``) the mode the umask grants a new file or directory.

    A directory keeps its setgid bit (inherited from a setgid parent), so a group-shared
    data dir stays one group's.
    """
    mode = os.stat(path).st_mode
    full = 0o777 if stat.S_ISDIR(mode) else 0o666
    os.chmod(path, (full & ~current_umask()) | (mode & stat.S_ISGID))


def describe_owner(path: PathLike) -> str:
    """Say who owns ``path`` and its mode, for permission messages: ``owner uid 2001, group gid 3000, mode drwx------``.

    Names are added where this machine knows them (``owner alice (uid 2001)``).
    """
    try:
        info = os.stat(path)
    except OSError as error:
        return f"its owner and mode cannot be read ({error.strerror or error})"
    return (f"owner {_id_name(info.st_uid, 'uid')}, group {_id_name(info.st_gid, 'gid')}, "
            f"mode {stat.filemode(info.st_mode)}")


def unwritable(folder: PathLike) -> str | None:
    """Why this user may not make files in the existing directory ``folder`` ("it is on a read-only file system",
    "you may not write in it (owner ...)"); None when they may."""
    if os.access(folder, os.W_OK | os.X_OK):
        return None
    if hasattr(os, "statvfs") and os.statvfs(folder).f_flag & os.ST_RDONLY:
        return "it is on a read-only file system"
    return f"you may not write in it ({describe_owner(folder)})"


def _id_name(number: int, label: str) -> str:
    try:
        import grp
        import pwd

        name = pwd.getpwuid(number).pw_name if label == "uid" else grp.getgrgid(number).gr_name
    except (ImportError, KeyError):  # not POSIX, or an id this machine has no name for
        return f"{label} {number}"
    return f"{name} ({label} {number})"


def make_temp_dir(prefix: str, parent: PathLike) -> Path:
    """Create a new uniquely named directory ``<parent>/<prefix><random>`` with the umask's mode; return it.

    `tempfile.mkdtemp` with `follow_umask`: for staging directories that are renamed
    into place and so become what other users read.
    """
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    follow_umask(path)
    return path


def existing_file(path: PathLike, what: str) -> Path:
    """Return ``path`` (``~`` expanded) if it is an existing file, else raise saying what it is.

    ``what`` names the file wanted (``"a copy of NIST's gzip.zip"``) for the message.

    Raises
    ------
    IsADirectoryError
        ``path`` is a directory.
    FileNotFoundError
        Nothing (or no regular file) is at ``path``.
    """
    found = Path(path).expanduser()
    if found.is_dir():
        raise IsADirectoryError(f"{found} is a directory, not a file: give the path of {what} itself")
    if not found.is_file():
        raise FileNotFoundError(f"{found} does not exist: give the path of {what}")
    return found


def remove_tree(path: PathLike) -> OSError | None:
    """Delete the directory ``path`` and everything in it, as far as this user may; return the first error.

    None when all is gone (also when it was already gone). Unlike ``shutil.rmtree(...,
    ignore_errors=True)`` this says what could not be deleted and why: another user's
    files in a directory of theirs, say.
    """
    errors: list[OSError] = []

    def note(name: str, error: BaseException) -> None:
        if isinstance(error, OSError) and not isinstance(error, FileNotFoundError):  # rmtree reports only OSErrors
            error.filename = name  # rmtree's own is relative to a directory descriptor
            errors.append(error)

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda function, name, error: note(name, error))
    else:
        shutil.rmtree(path, onerror=lambda function, name, info: note(name, info[1]))
    return errors[0] if errors else None


@contextmanager
def atomic_path(destination: PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``destination``; replace ``destination`` with it on success.

    The temporary file (``.<name>.<random>.tmp`` in the same directory, so the final
    ``os.replace`` is atomic; its mode follows the umask) is removed when the block raises, so a reader never sees
    a half-written ``destination``: it is either the old file or the complete new one. It is locked while
    the block runs, so that one a killed process left is told apart from a live one (`remove_abandoned_staging`).

    Examples
    --------
    >>> with atomic_path("out.json") as temporary:          # doctest: +SKIP
    ...     temporary.write_text("{}")
    """
    destination = Path(destination)
    with writing(destination):
        temporary, held = _locked_staging_file(destination)
        try:
            follow_umask(temporary)
            yield temporary
            os.replace(temporary, destination)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        finally:
            os.close(held)


def _locked_staging_file(destination: Path) -> tuple[Path, int]:
    """Create ``destination``'s temporary file; return it and a descriptor holding its lock (where locks exist).

    A cleaner may remove the file between its creation and its lock: then another is made.
    """
    while True:
        descriptor, name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)
        if fcntl is None:
            return Path(name), descriptor
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError:  # a file system without locks: the file is written unlocked, and never taken for abandoned
            return Path(name), descriptor
        if os.fstat(descriptor).st_nlink:
            return Path(name), descriptor
        os.close(descriptor)


def remove_abandoned_staging(folder: PathLike, names: Iterable[str]) -> tuple[list[Path], list[OSError]]:
    """Remove the temporary files of `atomic_path` in ``folder`` for the files ``names`` whose writer is gone.

    Only regular files named as `atomic_path` names them (``.<name>.<8 random characters>.tmp``, for a
    name in ``names``) that no live process holds locked are removed: never a file of another name,
    a link, or a live writer's. Where files cannot be locked (not POSIX, a file system without locks)
    nothing is removed.

    Returns
    -------
    removed, errors
        The files removed, and why others could not be (another user's, say).
    """
    pattern = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")
    wanted = set(names)
    removed: list[Path] = []
    errors: list[OSError] = []
    try:
        found = sorted(Path(folder).iterdir())
    except OSError:
        return removed, errors
    for path in found:
        match = pattern.fullmatch(path.name)
        if fcntl is None or match is None or match["name"] not in wanted:
            continue
        try:
            if _remove_if_unlocked(path):
                removed.append(path)
        except OSError as error:
            errors.append(error)
    return removed, errors


def _remove_if_unlocked(path: Path) -> bool:
    """Delete the regular file ``path`` unless a live process holds its lock; whether it was deleted."""
    assert fcntl is not None
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError as error:
        if error.errno == errno.ELOOP:  # a link: not a file glyphforge made
            return False
        raise
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return False
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its writer is alive (BlockingIOError), or the file system has no locks: cannot tell
            return False
        path.unlink()
        return True
    finally:
        os.close(descriptor)


#: What each storage errno means and what to do, for `storage_error`.
_STORAGE_ADVICE = {
    errno.ENOSPC: ("the disk is full", "Free space there, or give a data dir on a larger disk (--data-dir or "
                   "$GLYPHFORGE_DATA_DIR), and run again: finished work is kept and resumed"),
    errno.EDQUOT: ("your disk quota is exhausted", "Free space within your quota, or give a data dir elsewhere "
                   "(--data-dir or $GLYPHFORGE_DATA_DIR), and run again: finished work is kept and resumed"),
    errno.EROFS: ("the file system is read-only", "Give a writable data dir (--data-dir or $GLYPHFORGE_DATA_DIR)"),
    errno.EACCES: ("permission is denied", "Give a data dir you can write to (--data-dir or $GLYPHFORGE_DATA_DIR), "
                   "or fix the directory's permissions (a data dir a group shares: its owner runs `chmod -R g+rwX` "
                   "on it, and every member works with `umask 002`)"),
    errno.EPERM: ("the operation is not permitted", "Give a data dir you can write to (--data-dir or "
                  "$GLYPHFORGE_DATA_DIR)"),
}


def path_too_long(path: PathLike) -> str | None:
    """Why this system refuses ``path`` as too long (ENAMETOOLONG), naming the limit; None when it is not.

    A name in it longer than its file system allows (``NAME_MAX``, 255 bytes on most), or the whole longer
    than a path may be (``PATH_MAX``, 4,096 bytes on Linux).
    """
    where = Path(path).absolute()
    existing = next((folder for folder in where.parents if os.path.isdir(folder)), Path(where.anchor or "/"))
    name_max, path_max = (_limit(existing, name, default) for name, default in (("PC_NAME_MAX", 255),
                                                                                ("PC_PATH_MAX", 4096)))
    for part in where.parts[1:]:
        if len(os.fsencode(part)) > name_max:
            shown = part if len(part) <= 40 else f"{part[:20]}...{part[-12:]}"
            return (f"its name {shown!r} is {len(os.fsencode(part)):,} bytes long, more than the {name_max:,} a "
                    "name may have on that file system")
    if len(os.fsencode(where)) >= path_max:
        return f"it is {len(os.fsencode(where)):,} bytes long, more than the {path_max - 1:,} a path may have here"
    return None


def _limit(folder: Path, name: str, default: int) -> int:
    """``os.pathconf(folder, name)``, or ``default`` where the system does not say (not POSIX)."""
    try:
        return os.pathconf(folder, name)
    except (AttributeError, ValueError, OSError):
        return default


def shown_path(path: PathLike) -> str:
    """``path`` for a message: whole, or its start and end around ``...`` when longer than 200 characters."""
    text = str(path)
    return text if len(text) <= 200 else f"{text[:80]}...{text[-60:]} ({len(text):,} characters)"


def storage_error(error: OSError, path: PathLike, fix: str | None = None) -> OSError:
    """Return ``error`` as a `StorageError` naming ``path`` and the fix (the free space where it matters, the owner
    of the folder that refuses, the limit of a path too long); other errors unchanged.

    ``fix`` replaces the advice about the data dir, for writes elsewhere (an export).
    """
    if error.errno == errno.ENAMETOOLONG and not isinstance(error, StorageError):
        too_long = path_too_long(error.filename or path) or path_too_long(path) or "it is too long for this system"
        converted = StorageError(f"cannot use {shown_path(error.filename or path)}: {too_long} (ENAMETOOLONG). Give "
                                 "a shorter path")
        converted.errno, converted.filename = error.errno, str(error.filename or path)
        return converted
    advice = _STORAGE_ADVICE.get(error.errno or 0)
    if advice is None or isinstance(error, StorageError):
        return error
    why, fix = advice[0], fix or advice[1]
    where = Path(path)
    existing = next((folder for folder in (where, *where.parents) if folder.exists()), None)
    free = ""
    if existing is not None and error.errno in (errno.EACCES, errno.EPERM):
        free = f" ({existing}: {describe_owner(existing)})"
    elif existing is not None:
        try:
            free = f" ({shutil.disk_usage(existing).free / 1e6:,.1f} MB free there)"
        except OSError:
            pass
    converted = StorageError(f"cannot write {where}: {why}{free} ({os.strerror(error.errno or 0)}). {fix}")
    converted.errno, converted.filename = error.errno, str(where)
    return converted


@contextmanager
def writing(path: PathLike, fix: str | None = None) -> Iterator[None]:
    """Turn storage ``OSError`` s raised in the block (ENOSPC, EDQUOT, EROFS, EACCES, EPERM, ENAMETOOLONG) into
    `StorageError` s.

    ``path`` is what the block writes; the error names it, the free space where known
    and what to do (``fix``, when given, instead of the advice about the data dir).
    """
    try:
        yield
    except OSError as error:
        converted = storage_error(error, path, fix)
        if converted is error:
            raise
        raise converted from error
