"""What is at a local path a verb writes, named once so that every verb treats it alike.

A verb's outputs are regular files, written whole by a rename from a temporary twin beside
them (readers never see half a file), and folders. A rename puts a regular file where the
path was, and a twin or a sibling (prepare's rejects file) lands beside it: right for a file,
ruinous for a device (`-o /dev/null` once left a regular file in /dev/null's place for every
later process). So each path is looked at first:

- nothing there yet, a regular file, a folder: written as always;
- a stream, written straight through, never renamed over, nothing beside it: /dev/null, a
  terminal, or one of this process's own open files named through /dev/stdout, /dev/stderr,
  /dev/fd/N or /proc/self/fd/N (a pipe, the shell's `> file`, `>(gzip > x)`);
- anything else is refused before any work, exit 2, with the reason: a block device (a
  disk), another character device (/dev/full fails every write), a named pipe (with no
  reader a write waits forever; `-o /dev/stdout > FIFO` streams into it), a socket, a file of
  the kernel's /proc or /sys.

A stream takes one file, never a folder; a place that is read back (the fleet file) takes
no stream either.
"""

from __future__ import annotations

import enum
import fcntl
import os
import re
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from regen.errors import UNWRITABLE_ERRNOS, ConfigError, OutputError

Want = Literal["file", "folder"]

# /dev/stdout, /dev/fd/3, /proc/self/fd/1: a name for a file this process already holds open
NAMED_FDS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
FD_LINK = re.compile(r"^/(?:dev/fd|proc/(?:self|thread-self|(\d+))/fd)/(\d+)$")
KERNEL_FILES = ("/proc", "/sys")
NULL = (1, 3)
FULL = (1, 7)
# terminals: /dev/tty* and serial lines (4), /dev/tty and /dev/console (5:0, 5:1), /dev/pts/*
TERMINALS = {4, *range(136, 144)}
CONSOLES = {(5, 0), (5, 1)}


class Kind(enum.Enum):
    NEW = "nothing there yet"
    FILE = "a regular file"
    FOLDER = "a folder"
    STREAM = "a stream"


@dataclass(frozen=True)
class Place:
    """`path`: where to write (a link to a regular file: the file it names, so the rename
    replaces the file and keeps the link); `fd`: a stream that is one of this process's open
    files; `about`: how messages name a stream ("/dev/null", "standard output")."""

    path: Path
    kind: Kind
    option: str = "the output"
    fd: int | None = None
    about: str = ""

    @property
    def is_stream(self) -> bool:
        return self.kind is Kind.STREAM


def place_of(path: str | os.PathLike, option: str = "the output", want: Want = "file") -> Place:
    """What is at `path` (a local path), or ConfigError (exit 2) saying why `want` (a file,
    or a folder) may not be written there: a device, a FIFO, a socket, /proc; a file where a
    folder goes (the path or one of its parents), a folder where a file goes. `option`: the
    flag that named it, for the message."""
    given = Path(path)
    fd = own_fd(given)
    if fd is not None:
        return _checked_stream(Place(given, Kind.STREAM, option, fd, _fd_name(fd)), option, want)
    if _in_kernel_files(given):
        raise _refused(option, given, "is in the kernel's /proc or /sys, not storage", want)
    try:
        st = os.stat(given)
    except (FileNotFoundError, NotADirectoryError):
        blocker = in_the_way(given.parent)
        if blocker is not None:
            raise not_a_folder(option, given, blocker) from None
        return Place(given, Kind.NEW, option)
    except OSError:
        return Place(given, Kind.NEW, option)  # no permission to look: the write will say so
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        if want == "file":
            raise _refused(option, given, "is a folder, where a file should be", want)
        return Place(given, Kind.FOLDER, option)
    if stat.S_ISREG(mode):
        if want == "folder":
            raise not_a_folder(option, given, given)
        return Place(
            Path(os.path.realpath(given)) if given.is_symlink() else given, Kind.FILE, option
        )
    if stat.S_ISCHR(mode):
        numbers = (os.major(st.st_rdev), os.minor(st.st_rdev))
        about = _sink_name(numbers)
        if about:
            return _checked_stream(Place(given, Kind.STREAM, option, None, about), option, want)
        raise _refused(option, given, _device_reason(numbers), want)
    if stat.S_ISBLK(mode):
        raise _refused(
            option, given, "is a block device (a disk): writing there overwrites it", want
        )
    if stat.S_ISFIFO(mode):
        raise _refused(
            option,
            given,
            "is a named pipe (FIFO): with no reader a write waits forever",
            want,
            hint=None
            if want == "folder"
            else f"to stream into it, give {option} /dev/stdout and redirect: `... {option} "
            f"/dev/stdout > {given}`; or give {option} a file path",
        )
    raise _refused(option, given, "is a socket, not a file", want)


def own_fd(path: Path) -> int | None:
    """The descriptor `path` names when it is one of this process's open files (/dev/stdout,
    /dev/fd/N, /proc/self/fd/N, or a link to one of them), else None."""
    text = os.path.abspath(path)
    for _ in range(8):  # /dev/stdout -> /proc/self/fd/1: a short chain of links
        if text in NAMED_FDS:
            return NAMED_FDS[text]
        found = FD_LINK.match(text)
        if found and (found[1] is None or int(found[1]) == os.getpid()):
            return int(found[2])
        if not os.path.islink(text):
            return None
        text = os.path.normpath(os.path.join(os.path.dirname(text), os.readlink(text)))
    return None


@contextmanager
def streamed(place: Place) -> Iterator[BinaryIO]:
    """A stream opened for writing (`open_through`); its reader gone is a message (exit 6)."""
    try:
        with open_through(place) as fh:
            yield fh
    except BrokenPipeError:
        raise pipe_closed(place) from None


def open_through(place: Place) -> BinaryIO:
    """A stream opened for writing. One of this process's descriptors is written through a
    duplicate of it (what Python buffered for it first), so the shell's `> file` or `>>`
    offset is shared, not restarted, and closing it leaves the descriptor open."""
    if place.fd is None:
        return open(place.path, "wb")  # the caller's `with` closes it
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()
    return os.fdopen(os.dup(place.fd), "wb")


def pipe_closed(place: Place) -> OutputError:
    """A stream whose reader went away (`regen ... -o /dev/stdout | head`): exit 6."""
    return OutputError(
        f"cannot write {place.option} {place.path}: {place.about} was closed by its reader",
        hint="keep the reading end open until regen ends, or give a file path",
    )


def _checked_stream(place: Place, option: str, want: Want) -> Place:
    if want == "folder":
        raise _refused(option, place.path, f"is {place.about}, not a folder", want)
    if place.fd is not None:
        try:
            flags = fcntl.fcntl(place.fd, fcntl.F_GETFL)
        except OSError:
            raise _refused(
                option, place.path, f"names {place.about}, which is not open", want
            ) from None
        if flags & os.O_ACCMODE == os.O_RDONLY:
            raise _refused(option, place.path, f"names {place.about}, open for reading only", want)
    return place


def _refused(option: str, path: Path, why: str, want: Want, hint: str | None = None) -> ConfigError:
    usual = {
        "file": f"give {option} a file path (or /dev/null to discard it)",
        "folder": f"give {option} the path of a folder (made if missing)",
    }
    return ConfigError(f"cannot write {option} {path}: it {why}", hint=hint or usual[want])


def _sink_name(numbers: tuple[int, int]) -> str:
    if numbers == NULL:
        return "/dev/null"
    if numbers[0] in TERMINALS or numbers in CONSOLES:
        return "a terminal"
    return ""


def _device_reason(numbers: tuple[int, int]) -> str:
    if numbers == FULL:
        return "is /dev/full, which fails every write (no space left on device)"
    return f"is a character device ({numbers[0]}:{numbers[1]}), not /dev/null or a terminal"


def _fd_name(fd: int) -> str:
    return {0: "standard input", 1: "standard output", 2: "standard error"}.get(
        fd, f"file descriptor {fd}"
    )


def _in_kernel_files(path: Path) -> bool:
    """Under /proc or /sys, as typed or once its links are followed."""
    for text in (os.path.abspath(path), os.path.realpath(path)):
        if any(text == root or text.startswith(f"{root}/") for root in KERNEL_FILES):
            return True
    return False


def make_folder(path: str | os.PathLike, option: str) -> Path:
    """Make the folder `path` and its parents, or say why not: ConfigError (exit 2) where
    something else is in the way (a file, a device), OutputError (exit 6) where the disk
    refuses (read-only, full)."""
    folder = Path(path)
    place_of(folder, option, "folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # made under us, between the look and now
        raise not_a_folder(option, folder, in_the_way(folder) or folder) from None
    except OSError as exc:
        if exc.errno in UNWRITABLE_ERRNOS:  # the fix is the storage's
            raise OutputError.writing(folder, exc) from exc
        raise ConfigError(f"cannot create {option} {folder}: {exc.strerror}") from exc
    return folder


def in_the_way(path: Path) -> Path | None:
    """The nearest of `path` and its parents that exists and is not a folder, if any."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return None if candidate.is_dir() else candidate
    return None


def not_a_folder(option: str, path: Path, blocker: Path) -> ConfigError:
    """`blocker` (`path` itself or one of its parents) is in the way of a folder."""
    what = "a file" if blocker.is_file() else "not a file or folder"
    if blocker == path:
        where, fix = "it", f"give {option} a folder path (made if missing), or move {path} away"
    else:
        where, fix = str(blocker), f"move {blocker} away, or give {option} another path"
    return ConfigError(
        f"cannot write {option} {path}: {where} is {what}, where a folder should be", hint=fix
    )
