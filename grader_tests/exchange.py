"""Collecting what students hand in, with the instructor's rights, without trusting it.

Two of nbgrader's ways in read folders and files that students wrote:

* ``nbgrader collect`` (and ``tools/unlock_training.py --collect``) copies each
  submission folder of the exchange's ``inbound/``, a folder every student can write.
  nbgrader's own copy (``shutil.copytree``) follows symbolic links, so a link there hands
  in whatever file the instructor can read. :class:`ExchangeCollect` (set as
  ``c.ExchangeFactory.collect`` in ``nbgrader_config.py``) copies with
  :func:`copy_submission`, which copies regular files and folders only and refuses, with
  a logged message naming the student and the file, anything else (links, FIFOs,
  devices). The submission time kept is checked against what the student cannot
  forge (:func:`settle_timestamp`): the inode change times of the submitted files.
* ``nbgrader zip_collect`` files the notebooks of a learning platform's download by their
  file names. :class:`CanvasCollector` (``c.ZipCollectApp.collector_plugin``) trusts only
  the names the platform wrote: files unpacked from a student's own archive inside the
  download are skipped, student ids that are not a plain folder name are refused, one
  student's several files of one notebook keep only the latest, and Canvas's ``LATE_``
  mark becomes a timestamp after the due date, so nbgrader's late penalty applies.

And one way out: ``nbgrader release_feedback`` hands each student the page in
``feedback/``; :class:`ExchangeReleaseFeedback` (``c.ExchangeFactory.release_feedback``)
releases none whose score differs from the gradebook's (a page left from before a regrade).
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import shutil
import stat
from collections.abc import Callable
from typing import Any

from nbgrader.exchange.default import ExchangeCollect as _NbgraderExchangeCollect
from nbgrader.exchange.default import ExchangeReleaseFeedback as _NbgraderReleaseFeedback
from nbgrader.plugins import ExtractorPlugin, FileNameCollectorPlugin
from nbgrader.utils import ignore_patterns, unzip
from traitlets import Float

from .student_ids import student_id_problem, valid_student_id

__all__ = ["CanvasCollector", "ExchangeCollect", "ExchangeReleaseFeedback", "PlatformExtractor", "REFUSED_DIRECTORY",
           "TIMESTAMP_NOTE", "copy_submission", "ownership_problem", "read_refused",
           "safe_student_id", "settle_timestamp"]

_log = logging.getLogger(__name__)

# O_NOFOLLOW: opening a name that is a symbolic link fails (ELOOP), so a name swapped for
# a link between the check and the copy is not followed either. O_NONBLOCK: opening a
# FIFO does not wait for a writer (it is refused after fstat).
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_OPEN_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)


def copy_submission(src: str | os.PathLike, dest: str | os.PathLike, *, who: str = "",
                    ignore: Callable[[str, list[str]], list[str]] | None = None,
                    log: logging.Logger | logging.LoggerAdapter | None = None) -> list[str]:
    """Copy the folder ``src`` (written by a student) to the new folder ``dest``, following
    no symbolic link.

    Regular files are copied with their permission bits and times, folders recursively;
    every other entry (a symbolic link, wherever it points, a FIFO, a socket, a device) is
    left out and logged as a warning that names ``who`` and the entry. Each file and
    folder is opened with ``O_NOFOLLOW`` relative to its already opened parent, so an
    entry replaced by a link during the copy is refused too.

    Args:
        src: the folder to copy; when it is itself a symbolic link (or not a folder)
            nothing is copied and :class:`OSError` is raised.
        dest: the destination folder; it must not exist (created, with its parents).
        who: the student the folder belongs to (for the messages).
        ignore: ``shutil.copytree``'s ``ignore`` callable, ``(folder, names) -> names
            to leave out`` (nbgrader's ``ignore_patterns``), or None.
        log: where to write the warnings (default: this module's logger).

    Returns:
        The refused entries, paths relative to ``src`` (str, sorted), empty when all was
        copied.

    Raises:
        OSError: ``src`` is a link or not a folder (``ELOOP`` / ``ENOTDIR``), ``dest``
            exists (``FileExistsError``), or reading / writing fails.
    """
    log = log or _log
    src, dest = os.fspath(src), os.fspath(dest)
    refused: list[str] = []
    fd = os.open(src, _OPEN_DIR)
    try:
        os.makedirs(dest)
        _copy_folder(fd, src, dest, "", who, ignore, log, refused)
        _copy_meta(os.fstat(fd), dest)
    finally:
        os.close(fd)
    return sorted(refused)


def _copy_folder(fd: int, src: str, dest: str, rel: str, who: str,
                 ignore: Callable[[str, list[str]], list[str]] | None,
                 log: logging.Logger | logging.LoggerAdapter, refused: list[str]) -> None:
    names = sorted(os.listdir(fd))
    left_out = set(ignore(os.path.join(src, rel), names)) if ignore is not None else set()
    for name in names:
        if name in left_out:
            continue
        rel_name = os.path.join(rel, name)
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        try:
            if stat.S_ISDIR(st.st_mode):
                child = os.open(name, _OPEN_DIR, dir_fd=fd)
                try:
                    os.mkdir(os.path.join(dest, rel_name))
                    _copy_folder(child, src, dest, rel_name, who, ignore, log, refused)
                    _copy_meta(os.fstat(child), os.path.join(dest, rel_name))
                finally:
                    os.close(child)
                continue
            if stat.S_ISREG(st.st_mode):
                child = os.open(name, _OPEN_FILE, dir_fd=fd)
                with os.fdopen(child, "rb") as reader:
                    opened = os.fstat(reader.fileno())
                    if stat.S_ISREG(opened.st_mode):
                        with open(os.path.join(dest, rel_name), "xb") as writer:
                            while chunk := reader.read(1 << 20):
                                writer.write(chunk)
                        _copy_meta(opened, os.path.join(dest, rel_name))
                        continue
        except OSError as exc:
            if not _is_link_error(exc):
                raise
        refused.append(rel_name)
        log.warning("Not collected: %r of %s's submission is not a regular file or folder "
                    "(a symbolic link, FIFO, socket or device): left out, nothing it "
                    "points at is read", rel_name, who or "a student")


def _is_link_error(exc: OSError) -> bool:
    """True for the errors of O_NOFOLLOW / O_DIRECTORY on a swapped entry."""
    import errno

    return exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


def _copy_meta(st: os.stat_result, path: str) -> None:
    os.chmod(path, stat.S_IMODE(st.st_mode))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


# The note the collect leaves in a collected folder whose timestamp.txt it replaced.
TIMESTAMP_NOTE = "timestamp_note.txt"
# Seconds by which the kernel's change time of a submitted file may follow the time in
# timestamp.txt: nbgrader's submit takes its time, copies the files, writes timestamp.txt
# and sets the modes, all within the same command.
TIMESTAMP_TOLERANCE = 10.0


def _observed_change(src: str) -> float:
    """The latest inode change time (``st_ctime``, s since the epoch) of ``src`` and of
    everything under it, read with ``lstat`` (no link followed)."""
    latest = os.lstat(src).st_ctime
    for folder, dirs, files in os.walk(src, followlinks=False):
        for name in dirs + files:
            with_ctime = os.lstat(os.path.join(folder, name))
            latest = max(latest, with_ctime.st_ctime)
    return latest


def settle_timestamp(src: str | os.PathLike, dest: str | os.PathLike, *, who: str = "",
                     tolerance: float = TIMESTAMP_TOLERANCE,
                     timestamp_format: str = "%Y-%m-%d %H:%M:%S.%f %Z",
                     log: logging.Logger | logging.LoggerAdapter | None = None) -> str | None:
    """Keep in the collected folder ``dest`` a submission time the student could not
    have forged.

    ``timestamp.txt`` lies in the student's own folder of the inbound ``src``: they can
    rewrite it. The inode change time (``st_ctime``) of that file and of the submission's
    other files and folders is set by the kernel only, to the current time, by any write,
    ``chmod`` or ``utime``. When the time claimed in ``dest/timestamp.txt`` is further
    than ``tolerance`` seconds from the latest change time under ``src``, earlier or
    later (or there is no readable timestamp), ``dest/timestamp.txt`` gets the change
    time, a note ``dest/timestamp_note.txt`` (``TIMESTAMP_NOTE``) gives the claimed and the
    observed time, and a warning naming ``who`` is logged. Otherwise ``dest`` is left as
    it is (and a ``timestamp_note.txt`` the student handed in is removed: the name is the
    kit's).

    Args:
        src: the submission folder in the inbound (read with ``lstat`` only).
        dest: the collected copy (``submitted/<student>/<assignment>``).
        who: the student (for the messages).
        tolerance: seconds (float) the change time may follow the claimed time.
        timestamp_format: the strftime format the replacement time is written in
            (nbgrader's ``Exchange.timestamp_format``).
        log: where to write the warning (default: this module's logger).

    Returns:
        The note written (str), or None when the claimed time was kept.

    Raises:
        OSError: ``src`` or ``dest`` cannot be read or written.
    """
    from nbgrader.utils import parse_utc

    log = log or _log
    src, dest = os.fspath(src), os.fspath(dest)
    observed = datetime.datetime.fromtimestamp(_observed_change(src), datetime.UTC)
    stamp = os.path.join(dest, "timestamp.txt")
    claimed_text, claimed = None, None
    if os.path.isfile(stamp) and not os.path.islink(stamp):
        with open(stamp, encoding="utf-8", errors="replace") as f:
            claimed_text = f.read().strip()
        try:
            claimed = parse_utc(claimed_text)
            if claimed.tzinfo is None:
                claimed = claimed.replace(tzinfo=datetime.UTC)
        except (ValueError, OverflowError, TypeError):
            claimed = None
    note_path = os.path.join(dest, TIMESTAMP_NOTE)
    if claimed is not None and abs((observed - claimed).total_seconds()) <= tolerance:
        if os.path.lexists(note_path):
            os.unlink(note_path)
        return None
    if os.path.lexists(stamp):
        os.unlink(stamp)
    with open(stamp, "x", encoding="utf-8") as f:
        f.write(observed.strftime(timestamp_format))
    note = (f"{who or 'the student'}'s timestamp.txt in the exchange claims "
            f"{claimed_text!r}, but its files were last changed at "
            f"{observed:%Y-%m-%d %H:%M:%S} UTC (the inode change time, which only the "
            f"kernel sets): collected as submitted at that time. If the files were "
            f"changed by someone else (the exchange copied with cp -a, a chown), put the "
            f"claimed time back into timestamp.txt by hand and delete this note.")
    if os.path.lexists(note_path):
        os.unlink(note_path)
    with open(note_path, "x", encoding="utf-8") as f:
        f.write(note + "\n")
    log.warning("Submission time replaced: %s", note)
    return note


# Where the collect keeps, for the instructor, each inbound folder it refused (a copy, no
# link followed) and ``refused.jsonl``, one JSON record per refusal: relative to the
# course folder, one subfolder per assignment.
REFUSED_DIRECTORY = "refused"
REFUSED_RECORDS = "refused.jsonl"


def folder_owners(path: str | os.PathLike) -> set[int]:
    """The uids owning the folder ``path`` and every entry under it (``lstat``: no link
    followed)."""
    path = os.fspath(path)
    owners = {os.lstat(path).st_uid}
    for folder, dirs, files in os.walk(path, followlinks=False):
        for name in dirs + files:
            owners.add(os.lstat(os.path.join(folder, name)).st_uid)
    return owners


def user_name(uid: int) -> str:
    """The login name of ``uid``, or ``uid <n>`` when the system has none."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def ownership_problem(path: str | os.PathLike, student: str,
                      collector_uid: int | None = None) -> str | None:
    """Why the inbound folder ``path``, named as ``student``'s submission, is not theirs,
    or None when it is.

    The folder and every entry under it must be owned by the unix user named ``student``
    or by the user collecting (``collector_uid``, default the effective uid): on a
    multi-user exchange only root can give a file to another user, so a folder a student
    made in the inbound (mode 0733, writable by all) under a classmate's name is owned by
    that student. Where all students are one uid (a single-user demo, a container), their
    folders are all the collector's own and this rule cannot tell them apart.

    Args:
        path: the inbound folder (``<student>+<assignment>+<time>``).
        student: the student id the name claims.
        collector_uid: the uid allowed besides the student's (the instructor's).

    Returns:
        None, or the reason (str) naming the claimed student and the owner(s).

    Raises:
        OSError: ``path`` cannot be read.
    """
    import pwd

    collector_uid = os.geteuid() if collector_uid is None else collector_uid
    allowed = {collector_uid}
    try:
        allowed.add(pwd.getpwnam(student).pw_uid)
    except KeyError:
        pass  # no such login: only the collector's own folders are the student's
    others = sorted(folder_owners(path) - allowed)
    if not others:
        return None
    names = ", ".join(user_name(uid) for uid in others)
    return (f"it is named as {student}'s submission but it, or a file in it, is owned by "
            f"{names}")


class ExchangeCollect(_NbgraderExchangeCollect):
    """nbgrader's ``ExchangeCollect`` that collects for a student only a folder of
    theirs, whose copy follows no link (:func:`copy_submission`) and that keeps a
    submission time the student could not have forged (:func:`settle_timestamp`).

    Set in ``nbgrader_config.py`` as ``c.ExchangeFactory.collect``. Before nbgrader picks
    each student's latest inbound folder, every folder is checked: its name must parse
    (``<student>+<assignment>+<time>``), the student id must pass the kit's rule
    (:func:`grader_tests.student_ids.student_id_problem`) and the folder and its files
    must belong to that student (:func:`ownership_problem`; off with nbgrader's own
    ``CollectApp.check_owner = False``). A refused folder is left in the inbound as it
    is, copied for review to ``refused/<assignment>/`` of the course with a record in
    ``refused/<assignment>/refused.jsonl`` (which the dashboard lists), and logged as an
    error naming both users; the student's latest folder of their own is collected.
    Everything else (``--update``, ``--before-duedate``) is nbgrader's.
    ``timestamp_tolerance`` (seconds, default 10) is how far the claimed time may be from
    the submitted files' change time.
    """

    timestamp_tolerance = Float(TIMESTAMP_TOLERANCE, help=(
        "Seconds by which the inode change time of a submission's files may follow the "
        "time in its timestamp.txt; beyond that the change time is the submission "
        "time (flagged in timestamp_note.txt)")).tag(config=True)

    def init_src(self) -> None:
        """nbgrader's choice of each student's latest inbound folder, among the folders
        that pass the kit's checks (see the class); the others are refused
        (:meth:`refuse`).

        Raises:
            nbgrader.exchange.ExchangeError: no course id, no inbound folder, or it is
                not readable (nbgrader's own checks).
        """
        import glob

        from nbgrader.api import Gradebook, MissingEntry
        from nbgrader.utils import check_mode

        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        student_id = self.coursedir.student_id if self.coursedir.student_id else "*"
        pattern = os.path.join(self.inbound_path,
                               f"{student_id}+{self.coursedir.assignment_id}+*")
        self.refused_records: list[dict] = []
        by_student: dict[str, list[dict]] = {}
        for path in sorted(glob.glob(pattern)):
            name = os.path.basename(path)
            try:
                record = self._path_to_record(path)
            except Exception:  # noqa: BLE001 (nbgrader's parse: ExchangeError, ValueError, ...)
                self.refuse(path, name.split("+", 1)[0], None,
                            "its name does not end in a submission time")
                continue
            problem = student_id_problem(record["username"])
            if problem is None and self.check_owner:
                try:
                    problem = ownership_problem(path, record["username"])
                except OSError as exc:
                    problem = f"it cannot be read ({exc})"
            if problem is not None:
                self.refuse(path, record["username"], record, problem)
                continue
            self._no_future(path, record)
            by_student.setdefault(record["username"], []).append(record)
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        self.src_records = []
        for records in by_student.values():
            records = self._sort_by_timestamp(records)
            if self.duedate is not None and self.before_duedate:
                on_time = [r for r in records if r["timestamp"] <= self.duedate]
                records = on_time or records
            self.src_records.append(records[0])

    def _no_future(self, path: str, record: dict) -> None:
        """A folder whose name claims a time later than its files' change time by more
        than ``timestamp_tolerance`` is ordered (and compared with ``--update``) by that
        change time, as :func:`settle_timestamp` stamps it: a far-future name never wins
        over a later submission."""
        claimed = record["timestamp"]
        aware = claimed if claimed.tzinfo else claimed.replace(tzinfo=datetime.UTC)
        try:
            observed = datetime.datetime.fromtimestamp(_observed_change(path), datetime.UTC)
        except OSError:
            return
        if (aware - observed).total_seconds() > self.timestamp_tolerance:
            self.log.warning("%r claims a time after its files were last changed (%s UTC): "
                             "ordered by that change time", os.path.basename(path),
                             f"{observed:%Y-%m-%d %H:%M:%S}")
            record["timestamp"] = observed if claimed.tzinfo else observed.replace(tzinfo=None)

    def refuse(self, path: str, claimed: str, record: dict | None, reason: str) -> None:
        """Do not collect the inbound folder ``path`` (claimed for ``claimed``): leave it
        in the inbound, copy it (no link followed) to
        ``refused/<assignment>/<folder name>`` of the course, append a record to
        ``refused/<assignment>/refused.jsonl`` and log an error naming the claimed
        student, the owner(s) and ``reason``."""
        import json

        name = os.path.basename(path)
        try:
            owners = ", ".join(user_name(uid) for uid in sorted(folder_owners(path)))
        except OSError:
            owners = "unknown"
        where = os.path.join(self.coursedir.root, REFUSED_DIRECTORY,
                             self.coursedir.assignment_id)
        kept = os.path.join(where, name)
        try:
            if self.get_size(path) > 1000 * self.coursedir.max_dir_size:
                kept = "(not copied: larger than CourseDirectory.max_dir_size)"
            else:
                os.makedirs(where, exist_ok=True)
                if not os.path.lexists(kept):
                    copy_submission(path, kept, who=claimed, log=self.log)
        except OSError as exc:
            kept = f"(not copied: {exc})"
        entry = {"folder": name, "claimed": claimed, "owner": owners, "reason": reason,
                 "kept": os.path.relpath(kept, self.coursedir.root)
                 if os.path.isabs(kept) else kept,
                 "refused_at": datetime.datetime.now(datetime.UTC).isoformat(
                     timespec="seconds")}
        records = os.path.join(where, REFUSED_RECORDS)
        known = {r.get("folder") for r in read_refused(records)}
        if name not in known:
            with open(records, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry, sort_keys=True) + "\n")
        self.refused_records.append(entry)
        self.log.error("Refused %r (claimed for %r, owned by %s): %s. Not collected: left "
                       "in the inbound and kept for review in %s", name, claimed, owners,
                       reason, entry["kept"])

    def do_copy(self, src: str, dest: str, log: Any = None) -> None:
        """Copy the submission folder ``src`` of the inbound to ``dest`` (``submitted/``).

        The size limit and ``CourseDirectory.ignore`` / ``include`` / ``max_file_size``
        are nbgrader's; links and special files are left out and logged
        (:func:`copy_submission`). A submission folder that is itself a link is not
        collected at all (logged as an error).

        Raises:
            RuntimeError: the folder exceeds ``CourseDirectory.max_dir_size``.
        """
        who = os.path.basename(src).split("+", 1)[0]
        if os.path.islink(src) or not os.path.isdir(src):
            self.log.error("Not collected: %s's submission %r is a symbolic link or not a "
                           "folder", who, os.path.basename(src))
            return
        dir_size = self.get_size(src)
        if dir_size > 1000 * self.coursedir.max_dir_size:
            self.log.error("Directory size is too big")
            raise RuntimeError(f"Directory size is too big. Size is {dir_size}, maximum size "
                               f"is {1000 * self.coursedir.max_dir_size}")
        try:
            copy_submission(src, dest, who=who, log=self.log,
                            ignore=ignore_patterns(exclude=self.coursedir.ignore,
                                                   include=self.coursedir.include,
                                                   max_file_size=self.coursedir.max_file_size,
                                                   log=self.log))
        except OSError as exc:
            if not _is_link_error(exc):
                raise
            self.log.error("Not collected: %s's submission %r became a link", who,
                           os.path.basename(src))
            return
        settle_timestamp(src, dest, who=who, tolerance=self.timestamp_tolerance,
                         timestamp_format=self.timestamp_format, log=self.log)
        if self.coursedir.groupshared:  # as nbgrader's do_copy: group read / write back
            for dirname, _, filenames in os.walk(dest):
                _add_mode(dirname, 0o2770, 0o2777, self.log)
                for filename in filenames:
                    _add_mode(os.path.join(dirname, filename), 0o660, 0o777, self.log)


# The page's own record of what it shows: "<score after the late penalty> <late penalty>"
# (nbgrader's GetGrades) on its heading, written
# by the kit's feedback template (grader_tests/templates/feedback/offline.html.j2).
_PAGE_GRADE = re.compile(r'data-attention-kit-grade="([^"]*)"')


def _handed_in_at(folder: str) -> str | None:
    try:
        with open(os.path.join(folder, "timestamp.txt"), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def page_grade_problem(page: str | os.PathLike, gradebook: Any, assignment: str,
                       student: str, submitted: str | os.PathLike | None = None) -> str | None:
    """Why the feedback page ``page`` (``feedback/<student>/<assignment>/<notebook>.html``)
    must not be released, or None: the score (after the late penalty) or the late penalty
    it shows is not the gradebook's for that notebook (a page generated before a
    regrade), the gradebook holds no grade (withdrawn after a failed regrade), the page
    does not say what it shows, or it is of another submission than the one in
    ``submitted`` (its ``timestamp.txt``, which nbgrader keeps beside the page, differs:
    a regrade by the batch leaves ``autograded/``, and so the page's code and report, the
    earlier file's).

    Args:
        gradebook: an open ``nbgrader.api.Gradebook`` of the course.
        submitted: the student's folder ``submitted/<student>/<assignment>``, or None.
    """
    from nbgrader.api import MissingEntry

    notebook = os.path.splitext(os.path.basename(page))[0]
    with open(page, encoding="utf-8", errors="replace") as f:
        found = _PAGE_GRADE.search(f.read())
    try:
        shown = [float(v) for v in found[1].split()] if found else []
    except ValueError:
        shown = []
    if len(shown) != 2:
        return "the page does not say its score (made by an older template)"
    try:
        recorded = gradebook.find_submission_notebook(notebook, assignment, student)
    except MissingEntry:
        return "the gradebook has no submission of this notebook"
    if any(grade.auto_score is None and grade.manual_score is None
           for grade in recorded.grades):
        return "the gradebook holds no grade for it (not graded)"
    penalty = float(recorded.late_submission_penalty or 0.0)
    held = [float(recorded.score) - penalty, penalty]  # as nbgrader's GetGrades shows them
    if any(abs(a - b) > 1e-6 for a, b in zip(shown, held)):
        return (f"the page shows {shown[0]:.2f} points (late penalty {shown[1]:.2f}), the "
                f"gradebook {held[0]:.2f} (late penalty {held[1]:.2f})")
    if submitted is not None:
        page_time, latest = _handed_in_at(os.path.dirname(page)), _handed_in_at(str(submitted))
        if latest is not None and page_time != latest:
            return (f"the page is of the submission handed in at {page_time}, submitted/ "
                    f"holds the one handed in at {latest}")
    return None


class ExchangeReleaseFeedback(_NbgraderReleaseFeedback):
    """nbgrader's ``release_feedback``, releasing only pages that show the gradebook's
    grade for the student's latest submission: a student any of whose pages differs
    (``page_grade_problem``) gets none,
    with an error naming the student and the command that makes the page again; the
    others are released as nbgrader releases them."""

    def copy_files(self) -> None:
        import glob

        from nbgrader.api import Gradebook

        refused = []
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            # (src_path: nbgrader's pattern, feedback/<student or *>/<assignment>)
            for page in sorted(glob.glob(os.path.join(self.src_path, "*.html"))):
                student = os.path.basename(os.path.dirname(os.path.dirname(page)))
                assignment = self.coursedir.assignment_id
                problem = page_grade_problem(page, gb, assignment, student, self.coursedir.format_path(
                    self.coursedir.submitted_directory, student, assignment))
                if problem is not None:
                    refused.append(student)
                    self.log.error(
                        "Feedback not released to %r: %s: %s. Run `nbgrader generate_feedback "
                        "%s --student %s --force` (after `nbgrader autograde %s --student %s "
                        "--force` if the page is of an earlier submission), then release "
                        "again", student, os.path.relpath(page, self.coursedir.root), problem,
                        assignment, student, assignment, student)
        excluded = self.coursedir.student_id_exclude
        if refused:
            self.coursedir.student_id_exclude = ",".join(
                [s for s in excluded.split(",") if s] + sorted(set(refused)))
        try:
            super().copy_files()
        finally:
            self.coursedir.student_id_exclude = excluded


def _add_mode(path: str, bits: int, mask: int, log: Any) -> None:
    mode = os.stat(path).st_mode
    if mode & bits != bits:
        try:
            os.chmod(path, (mode | bits) & mask)
        except PermissionError:
            log.warning("Could not update permissions of %s to make it groupshared", path)


# The kit's rule for a student id (grader_tests.student_ids), under its earlier name.
safe_student_id = valid_student_id


def read_refused(path: str | os.PathLike) -> list[dict]:
    """The records of ``refused.jsonl`` at ``path`` (``ExchangeCollect.refuse``); an
    unreadable line is skipped, a missing file is no record."""
    import json

    found = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    found.append(record)
    except FileNotFoundError:
        pass
    return found


class PlatformExtractor(ExtractorPlugin):
    """nbgrader's zip_collect extractor, unpacking the platform's archives only.

    nbgrader's own extractor also unpacks every archive inside the download
    (``tree=True``): a student's ``.gz`` that is no tarball, or a broken ``.zip``, stops
    the collection of the whole class, and what a student's archive holds is no
    submission the platform named anyway (:class:`CanvasCollector` skips it). Here each
    archive of ``archive/`` is unpacked into a folder of its name, the archives inside it
    are left as they are (a file the collector skips), and every other file of
    ``archive/`` is copied, as nbgrader does.
    """

    def extract(self, archive_path: str, extracted_path: str) -> None:
        """Unpack each archive of ``archive_path`` (walked) into ``extracted_path``.

        Args:
            archive_path: the ``archive/`` folder of the download (absolute).
            extracted_path: the ``extracted/`` folder (absolute, existing).

        Raises:
            ValueError, OSError, setuptools' ``UnrecognizedFormat``: an archive of
                ``archive/`` itself (the instructor's download) cannot be unpacked.
        """
        if not os.listdir(archive_path):
            self.log.warning("No files found in directory: %s", archive_path)
            return
        for folder, _, names in os.walk(archive_path):
            extract_to = os.path.normpath(os.path.join(
                extracted_path, os.path.relpath(folder, archive_path)))
            os.makedirs(extract_to, exist_ok=True)
            for name in sorted(names):
                path = os.path.join(folder, name)
                if os.path.splitext(name)[1] in self.zip_ext:
                    self.log.info("Extracting from: %s (archives inside it are not unpacked)",
                                  path)
                    unzip(path, extract_to, zip_ext=self.zip_ext, create_own_folder=True,
                          tree=False)
                else:
                    self.log.info("Copying from: %s", path)
                    shutil.copy(path, os.path.join(extract_to, name))


class CanvasCollector(FileNameCollectorPlugin):
    """nbgrader's file-name collector for zip_collect, trusting only the platform's names.

    ``named_regexp`` (``c.FileNameCollectorPlugin.named_regexp``) is nbgrader's; beyond
    ``student_id`` and ``file_id`` it may have the groups ``late`` (Canvas's ``LATE_``),
    ``copy`` (the ``N`` of Canvas's ``-N`` after a repeated file name) and ``attachment``
    (Canvas's attachment id). On top of nbgrader's matching:

    * a file unpacked from an archive inside the download (a folder beside an archive
      of its name) is skipped: its name is the student's, not the platform's;
    * a student id the kit's rule refuses
      (:func:`grader_tests.student_ids.student_id_problem`) is skipped, with the reason;
    * of one student's several files of one notebook, only the newest is collected:
      the highest attachment id (Canvas numbers uploads in order), then the latest upload
      time (a ``timestamp`` group), then the highest ``-N``; the others are skipped with a
      warning naming the file kept;
    * ``late`` gives the timestamp one second after the assignment's due date in the
      gradebook (the platform says late, not by how much: the penalty is the smallest the
      kit's policy takes), or, with no due date there, the time of the collection.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._latest: dict[tuple[str, str], str] | None = None
        self._late_stamp: str | None = None

    # -- where the extracted files are -----------------------------------------------------

    def _extracted_root(self) -> str | None:
        app = self.parent
        if app is None or not hasattr(app, "_format_collect_path"):
            return None
        return os.path.realpath(app._format_collect_path(app.extracted_directory))

    def _zip_ext(self) -> list[str]:
        app = self.parent
        extractor = getattr(app, "extractor_plugin_inst", None)
        return list(getattr(extractor, "zip_ext", None) or [".zip", ".gz"])

    def from_student_archive(self, path: str) -> bool:
        """True when ``path`` (a file of the extracted folder) was unpacked from an archive
        inside the download: one of its folders, below the extracted folder, sits beside
        an archive file of the same name (nbgrader unpacks ``x.zip`` into ``x/``)."""
        root = self._extracted_root()
        folder = os.path.dirname(os.path.realpath(path))
        zip_ext = self._zip_ext()
        while root is not None and folder.startswith(root + os.sep):
            parent, name = os.path.split(folder)
            for sibling in os.listdir(parent):
                stem, ext = os.path.splitext(sibling)
                if ext in zip_ext and stem.removesuffix(".tar") == name \
                        and os.path.isfile(os.path.join(parent, sibling)):
                    return True
            folder = parent
        return False

    # -- matching --------------------------------------------------------------------------

    def _plain(self, path: str, quiet: bool = False) -> dict | None:
        """nbgrader's match of ``path`` with the kit's checks, no choice among files;
        ``quiet``: log nothing (the warnings come when the file itself is collected)."""
        _, ext = os.path.splitext(path)
        if ext not in self.valid_ext or os.path.islink(path):
            return None
        if self.from_student_archive(path):
            if quiet:
                return None
            self.log.warning("Skipped %r: it comes from an archive a student handed in, and "
                             "only the platform's own file names say who a file is from",
                             path)
            return None
        if quiet:
            match = re.match(self.named_regexp, path) if self.named_regexp else None
            found = match.groupdict() if match else None
        else:
            found = self._match(path)
        if not found:
            return None
        problem = student_id_problem(found.get("student_id"))
        if problem is not None:
            if quiet:
                return None
            self.log.warning("Skipped %r: %r is refused as a student id: %s", path,
                             found.get("student_id"), problem)
            return None
        return found

    @staticmethod
    def _order(found: dict, path: str) -> tuple:
        """The sort key of a file among one student's files of a notebook, newest last:
        the attachment id (the platform numbers uploads in order), then the upload time
        when the pattern reads one (group ``timestamp``), then ``-N`` (the platform adds
        it only to a repeated name, so it is no order on its own), then the path."""
        def number(key: str) -> int:
            text = found.get(key)
            return int(text) if text and str(text).isdigit() else 0
        return (number("attachment"), str(found.get("timestamp") or ""), number("copy"), path)

    def _latest_files(self) -> dict[tuple[str, str], str]:
        """``{(student, file id): path}`` of the latest file of each, over the whole
        extracted folder (computed once)."""
        if self._latest is None:
            best: dict[tuple[str, str], tuple[tuple, str]] = {}
            root = self._extracted_root()
            for folder, _, files in os.walk(root) if root else ():
                for name in files:
                    path = os.path.join(folder, name)
                    found = self._plain(path, quiet=True)
                    if found and isinstance(found.get("file_id"), str):
                        key = (found["student_id"], os.path.splitext(found["file_id"])[0])
                        order = self._order(found, path)
                        if key not in best or order > best[key][0]:
                            best[key] = (order, path)
            self._latest = {key: path for key, (_, path) in best.items()}
        return self._latest

    def _late_timestamp(self) -> str:
        if self._late_stamp is None:
            due = None
            app = self.parent
            try:
                from nbgrader.api import Gradebook, MissingEntry

                with Gradebook(app.coursedir.db_url, app.coursedir.course_id) as gradebook:
                    try:
                        due = gradebook.find_assignment(app.coursedir.assignment_id).duedate
                    except MissingEntry:
                        due = None
            except Exception as exc:  # noqa: BLE001 (no gradebook yet: no due date)
                self.log.debug("No due date read from the gradebook: %s", exc)
            if due is not None:
                stamp = due + datetime.timedelta(seconds=1)
                self.log.warning("Files marked LATE_ by the platform are stamped %s UTC, one "
                                 "second after the due date: the platform does not say how "
                                 "late, so they lose the penalty of one day", stamp)
            else:
                stamp = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
                self.log.warning("Files marked LATE_ by the platform are stamped with the "
                                 "time of this collection, %s UTC: the gradebook has no due "
                                 "date for %r. Set it before autograde (the penalty then "
                                 "counts up to now, more than the true lateness: set the due "
                                 "date first and run zip_collect --force again)", stamp,
                                 app.coursedir.assignment_id)
            self._late_stamp = stamp.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
        return self._late_stamp

    def collect(self, submitted_file: str) -> dict | None:
        """nbgrader's hook: ``{"student_id", "file_id"[, "timestamp"]}`` for a file to
        collect, None for one to skip (see the class).

        Args:
            submitted_file: absolute path of a file of the extracted folder.

        Returns:
            The collected data (str values; ``timestamp`` as ``"%Y-%m-%d %H:%M:%S.%f
            UTC"``), or None.
        """
        found = self._plain(submitted_file)
        if not found:
            return None
        key = (found["student_id"], os.path.splitext(found["file_id"])[0])
        latest = self._latest_files().get(key, submitted_file)
        if os.path.realpath(latest) != os.path.realpath(submitted_file):
            self.log.warning("Skipped %r: an older attempt of %s's %r; kept %r, the newest "
                             "(the higher attachment id, which the platform gives in upload "
                             "order, then the later upload time; a -N after the name is no "
                             "order)", submitted_file, key[0], found["file_id"], latest)
            return None
        info = {"student_id": found["student_id"], "file_id": found["file_id"]}
        if found.get("timestamp"):
            info["timestamp"] = found["timestamp"]
        elif found.get("late"):
            info["timestamp"] = self._late_timestamp()
        return info

