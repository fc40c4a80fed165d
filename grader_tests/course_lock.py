"""One grader at a time per course: an OS lock on a file of the course folder.

``nbgrader autograde`` (the kit's converter, ``gradebook.autograde_converter``), the
kit's ``batch`` and the demo (``tools/demo.py``, for its whole run) take the lock of the
course they grade before they read or write anything of it. A second grader on the same
course prints one line naming the holder and waits until the first one ends, so that
nbgrader's ``Removing existing assignment`` of one run never deletes what the other has
just written, and the batch never reads a half-written ``autograded/``.

The lock is ``fcntl.flock`` on ``<course>/.grading.lock``, held by the open file: the
kernel releases it when the holder's process ends, however it ends (a killed grader
never leaves the course locked). The holder writes who it is into the file (pid, user,
command, since when) for the waiting one to print, and removes the file before it lets
go: a grader that finds the file it locked is no longer the file at that path (removed
by the holder it waited for) opens the new one and tries again, so no two graders ever
hold two files of the same path.

A run that grades in several processes at once (the demo's workers, and its retries on
nbgrader's command line) holds one lock for all of them: a child started with
``inherit_fds()`` among its ``pass_fds`` and the environment variable ``ENV`` finds that
it already holds the lock (the same open file, checked with ``flock`` itself) and takes
it no second time. The lock is per run, never per student.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import getpass
import os
import sys
from collections.abc import Callable, Iterator

from .i18n import _

LOCK_NAME = ".grading.lock"
# The environment variable through which a holder hands its lock to its own children:
# "<fd>:<device>:<inode>" of the locked file, the descriptor passed with pass_fds.
ENV = "ATTENTION_KIT_GRADING_LOCK"


def lock_path(root: str | os.PathLike[str]) -> str:
    """The lock file of the course folder ``root``: ``<root>/.grading.lock``."""
    return os.path.join(os.path.abspath(root), LOCK_NAME)


def _same_file(fd: int, path: str) -> bool:
    """True if the open descriptor ``fd`` is the file at ``path`` (not followed if a link)."""
    try:
        st, at = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (at.st_dev, at.st_ino)


def _inherited(path: str) -> bool:
    """True if this process holds the lock at ``path`` through a descriptor its parent
    run handed down (``ENV``): the same file, and ``flock`` on it succeeds without
    waiting, which only the open file that holds the lock (or a free lock) allows."""
    value = os.environ.get(ENV, "")
    try:
        fd, dev, ino = (int(part) for part in value.split(":"))
        st = os.fstat(fd)
    except (ValueError, OSError):
        return False
    if (st.st_dev, st.st_ino) != (dev, ino) or not _same_file(fd, path):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


_held: dict[str, int] = {}  # lock path -> descriptor, held by this process (and forks)


def holder(path: str) -> str:
    """What the lock file at ``path`` says about its holder (one line), or a placeholder
    when it says nothing yet."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = " ".join(f.read(500).split())
    except OSError:
        text = ""
    return text or _("another grader (it has not said who yet)")


def inherit_fds() -> tuple[int, ...]:
    """The descriptors to pass (``subprocess``'s ``pass_fds``) to a child of the run that
    holds the lock, with ``ENV`` in its environment, so that the child shares the lock."""
    return tuple(_held.values())


@contextlib.contextmanager
def course_lock(root: str | os.PathLike[str], command: str,
                say: Callable[[str], object] | None = None) -> Iterator[None]:
    """Hold the grading lock of the course folder ``root`` for the ``with`` block.

    Already held by this process, or handed down by the run this process belongs to
    (``ENV``), it is used as it is. Otherwise, when another grader holds it, ``say`` gets
    one line naming the holder (default: printed on stderr) and the call waits until the
    holder ends (Ctrl-C stops the wait).

    Args:
        root: the course folder (``CourseDirectory.root``).
        command: what holds the lock, for the line another grader prints
            (``"nbgrader autograde attention"``).
        say: where the waiting line goes (nbgrader's log, the batch's stderr).

    Raises:
        OSError: the lock file cannot be made in ``root`` (a folder not the instructor's).
    """
    path = lock_path(root)
    if path in _held or _inherited(path):
        yield
        return
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(fd)
                raise
            say(_("Waiting: another grader is grading this course ({holder}); one grader "
                  "at a time per course, this one starts when it ends (lock file {path})"
                  ).format(holder=holder(path), path=path))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
        if _same_file(fd, path):
            break
        os.close(fd)  # the holder removed that file as it ended: lock the one there now
    since = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    os.ftruncate(fd, 0)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a uid with no name and no LOGNAME
        user = str(os.getuid())
    os.write(fd, f"pid {os.getpid()}, user {user}, {command}, since {since}\n"
             .encode("utf-8", "replace"))
    st = os.fstat(fd)
    previous = os.environ.get(ENV)
    os.environ[ENV] = f"{fd}:{st.st_dev}:{st.st_ino}"
    _held[path] = fd
    try:
        yield
    finally:
        del _held[path]
        if previous is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = previous
        with contextlib.suppress(OSError):
            if _same_file(fd, path):
                os.unlink(path)  # still holding it: a waiter then locks a fresh file
        os.close(fd)
