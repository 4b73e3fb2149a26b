"""Whether this user may use a data dir on disk: every folder on the way entered, the data dir itself read.

A data dir inside a folder another user keeps to themselves (a home of mode 0700) cannot
be listed, so its entries cannot be seen: that is not an empty data dir, and not a
missing one. `check_data_dir_access` says so once, naming the folder that denies access,
its owner and mode, and what to do, before anything is looked up in it.

This module imports nothing from glyphforge but `glyphforge._files`, so anything may use it.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from glyphforge._files import describe_owner
from glyphforge.errors import AccessError, os_error_text


class DataDirAccessError(AccessError, PermissionError):
    """This user may not enter a folder on the way to a data dir, or not read the data dir; the message says which.

    ``errno`` is ``EACCES`` and ``filename`` the folder that denies access.
    """

    def __str__(self) -> str:
        return os_error_text(self)


_INSTEAD = "use another data dir (data_dir=, --data-dir or $GLYPHFORGE_DATA_DIR)"


def check_data_dir_access(data_dir: Path, instead: str = _INSTEAD) -> None:
    """Raise `DataDirAccessError` unless this user may enter every existing folder down to ``data_dir`` and read it.

    A data dir that does not exist yet passes when the folders that do exist may be entered
    (whether it can be made is the caller's check). Checks the real user's rights, as
    ``os.access`` does. ``instead``: what to do other than ask for access, the end of the message.

    Raises
    ------
    DataDirAccessError
        Naming the data dir, the folder that denies access, its owner and mode, and what to do.
    """
    data_dir = Path(data_dir).absolute()
    for folder in (*reversed(data_dir.parents), data_dir):
        try:
            info = os.stat(folder)
        except (FileNotFoundError, NotADirectoryError):
            return  # the rest does not exist (yet)
        except PermissionError:  # reached through a symbolic link into a closed folder
            raise _denied(data_dir, folder, "reach", instead) from None
        if not stat.S_ISDIR(info.st_mode):
            return  # a file on the way: the callers' own checks name it
        if folder == data_dir and not os.access(folder, os.R_OK | os.X_OK):
            raise _denied(data_dir, folder, "read", instead)
        if not os.access(folder, os.X_OK):
            raise _denied(data_dir, folder, "enter", instead)


def _denied(data_dir: Path, folder: Path, verb: str, instead: str) -> DataDirAccessError:
    """The error for ``data_dir`` when this user may not ``verb`` (enter, read, reach) ``folder``."""
    where = "it" if folder == data_dir else folder
    message = (f"the data dir {data_dir} cannot be used: you may not {verb} {where} ({describe_owner(folder)}), so "
               "glyphforge cannot see what it holds (this is not an empty data dir). Ask its owner to run "
               f"`chmod g+rx {folder}` (with a group you are in), or {instead}")
    return DataDirAccessError(errno.EACCES, message, str(folder))
