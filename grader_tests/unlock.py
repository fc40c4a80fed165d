"""The instructor's gate: release assignment `training` to the students who passed `attention`.

nbgrader releases an assignment to the whole class at once; this command releases
`training` student by student. It reads every student's `attention` score from nbgrader's
gradebook and, for each student whose score meets the threshold (default: full marks):

* releases the released notebook folder ``release/training/`` through nbgrader's exchange
  (``Exchange.root`` of ``nbgrader_config.py``) to a course of that student's own,
  ``<course id>-training-<student>`` (``exchange_course``): nbgrader's exchange has no
  per-student release, and a course per unlocked student is the one place of the exchange
  that student alone is told to fetch from. The student fetches it the way they fetched
  `attention` (``nbgrader fetch_assignment training --course attention-kit-training-<student>``,
  or that course in JupyterLab's assignment list), into ``training/`` next to their
  ``attention/`` folder, where the notebook's first cell finds their attention functions,
  and submits it back to that course; ``--collect`` brings those submissions into
  ``submitted/<student>/training/``. Without an authentication plugin, nbgrader's exchange
  lets anyone who can read it list every course in it: on a JupyterHub,
  ``JupyterHubAuthPlugin`` shows a course only to the members of the hub group
  ``nbgrader-<course>`` (the command prints it for each student released to);
* checks first, without following a link, that the student's course folder and the
  folders in it are absent (then made, with nbgrader's modes) or the instructor's own
  (anyone may write in the exchange root and compute the name): a link, a file or another
  user's folder there is set aside as ``<name>.refused-<time>`` (``release_to_exchange``)
  and named in the report and the ledger (``exchange_notes``);
* copies it to ``unlocked/<student>/training/`` as well, for a course that hands folders
  out another way (a learning platform, a per-student repository, a shared drive);
* writes the decision (threshold, score, time) as ``released.json`` beside each copy of the
  notebook, where the notebook's gate reads it and opens on it (``DECISION_FILE``), and
  makes the student's exchange course reachable by the unix user of that name alone
  (``_reserve_for_student``);
* records the release in ``unlocked/unlocked.json``, the one record of who was released
  `training`: a `training` submission of any other student is not graded
  (``not_released``).

It prints who is unlocked and who is not, and why (no `attention` submission, flagged for
review, not graded (autograde not run yet, or failed on the notebook), cells waiting for
manual grading, score below the threshold). A
student whose `attention` notebook is flagged in the gradebook (``SubmissionNotebook.
flagged``: the graders saw tampering, or a resubmission could not be graded) or any of
whose hidden-check cells needs a manual grade stays locked whatever the score, until the
instructor's review clears the flag and grades those cells. It can be re-run as new
grades arrive: a student already recorded in the ledger is never released twice (their
folder is left as it is, even if the release changed since; ``--dry-run`` shows what would
happen without writing anything).

Usage, from the course root (the repository root); ``python -m grader_tests unlock`` is the
same command::

    python tools/unlock_training.py                      # threshold: full marks
    python tools/unlock_training.py --threshold 90       # at least 90 points
    python tools/unlock_training.py --threshold 95%      # at least 95 % of the maximum
    python tools/unlock_training.py --db sqlite:////path/gradebook.db --dry-run
    python tools/unlock_training.py --no-exchange              # unlocked/ only
    python tools/unlock_training.py --collect                  # collect their submissions

The gradebook URL, the course root, the course id, the release folder and the exchange
come from ``nbgrader_config.py`` (``CourseDirectory.db_url``, ``CourseDirectory.root``,
``CourseDirectory.course_id``, ``CourseDirectory.release_directory``, ``Exchange.root``)
unless ``--db`` / ``--root`` / ``--release`` / ``--exchange`` are given: run from
``example/``, it releases the kit's ``release/training/`` to the example class through
``example/exchange/`` and into ``example/unlocked/``; with ``--root``, the exchange is the one that folder's
``nbgrader_config.py`` sets (none: ``unlocked/`` only). The exit
status is 0 when the command ran (whoever was unlocked), 2 when the gradebook or the
release folder cannot be used.
"""

import argparse
import contextlib
import datetime
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .release_ledger import (  # noqa: F401  (re-exported: the ledger's one reading)
    ASSIGNMENT,
    GATE_ASSIGNMENT,
    LEDGER,
    load_ledger,
    not_released,
)

# The instructor's decision, written beside the released notebook of each student released
# to (their exchange course and unlocked/<student>/training): the notebook's gate reads it
# (notebooks/gate.py, RELEASE_DECISION) and opens on it.
DECISION_FILE = "released.json"
# A threshold as ``parse_threshold`` reads it: ``("full", None)``, ``("points", x)`` or
# ``("percent", x)``.
Threshold = tuple[str, float | None]

from .gradebook import alembic_on_path
from .config import course_config
from .core import POINTS, grade_id
from .i18n import (
    ArgumentParser,
    _,
    course_language,
    folder_language,
    ngettext,
    not_a_course,
    use_language,
)
from .report import visible

# nbgrader grade ids of the hidden cells of `attention` (``softmax_hidden_checks``, ...).
HIDDEN_CHECKS = frozenset(grade_id(name) for name in POINTS)


def course_settings(config_dir: str | Path) -> tuple[str | None, str | None, str | None]:
    """``(db_url, root, course_id)`` from ``nbgrader_config.py`` in ``config_dir`` (any
    may be None)."""
    course = course_config(str(config_dir))
    return course.get("db_url"), course.get("root"), course.get("course_id")


def release_folder(root: Path, config_dir: str | Path) -> Path:
    """The released `training` folder of the course at ``root``:
    ``<root>/<CourseDirectory.release_directory>/training``, the release folder that
    ``nbgrader_config.py`` in ``config_dir`` names (``release`` by default; an absolute path
    as it is, as the example class's ``example/nbgrader_config.py`` gives the kit's own
    ``release/``)."""
    release = course_config(str(config_dir)).get("release_directory") or "release"
    return Path(root) / release / ASSIGNMENT


def exchange_root(config_dir: str | Path) -> str | None:
    """``Exchange.root`` of ``nbgrader_config.py`` in ``config_dir`` (None if unset)."""
    return course_config(str(config_dir), "Exchange").get("root")


def exchange_course(course_id: str, student: str) -> str:
    """The exchange course through which ``student`` alone receives `training`:
    ``"<course_id>-training-<student>"`` (``"attention-kit-training-alice"``)."""
    return f"{course_id}-{ASSIGNMENT}-{student}"


def _exchange_config(root: Path, course: str, exchange: str | Path, db_url: str | None = None):
    """The traitlets ``Config`` of one nbgrader exchange transfer of `training`: the
    course folder's ``nbgrader_config.py`` (its ``ignore`` list, ...) with the course id,
    the assignment, the exchange root and the gradebook set here."""
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config = Config()
    if (root / "nbgrader_config.py").is_file():
        config.merge(PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config())
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.course_id = course
    config.CourseDirectory.assignment_id = ASSIGNMENT
    if db_url:
        config.CourseDirectory.db_url = db_url
    config.Exchange.root = str(exchange)
    return config


class UnsafeExchangeCourse(OSError):
    """A student's exchange course (or a folder in it) is not a folder of the instructor's
    and could not be set aside: that student's release is refused."""


def _owner_name(uid: int) -> str:
    """The user name of ``uid`` (the number as text when the machine has no such user)."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _pinned_folder(parent_fd: int, name: str, mode: int, where: str, student: str,
                   notes: list[str]) -> int:
    """Open the folder ``name`` of the open folder ``parent_fd`` without following a link,
    making it (``mode``, as nbgrader would) when absent, and return its descriptor.

    A name that is no real folder owned by this process's user (a symbolic link, a file,
    another user's folder) is renamed, in the same parent, to ``<name>.refused-<UTC
    time>`` and a fresh folder made in its place; ``notes`` gets a sentence saying so
    (the path and the owner). ``where`` is the path shown in the messages.

    Raises:
        UnsafeExchangeCourse: the name cannot be set aside (nor opened as the folder just
            checked); the message names ``student`` and ``where``.
    """
    import stat as stat_

    uid = os.geteuid()
    for _attempt in range(3):
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            try:
                os.mkdir(name, 0o700, dir_fd=parent_fd)
            except FileExistsError:
                continue  # made meanwhile by someone else: checked again
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
            os.fchmod(fd, mode)  # (mkdir's mode passes the umask and drops set-group-id)
            return fd
        if stat_.S_ISDIR(st.st_mode) and st.st_uid == uid:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                             dir_fd=parent_fd)
            except OSError:
                continue  # swapped since the check: checked again
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) == (st.st_dev, st.st_ino):
                return fd
            os.close(fd)
            continue
        kind = (_("a symbolic link") if stat_.S_ISLNK(st.st_mode) else
                _("a folder") if stat_.S_ISDIR(st.st_mode) else _("a file"))
        owner = _owner_name(st.st_uid)
        aside = f"{name}.refused-{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%SZ}"
        for n in range(100):
            candidate = aside if n == 0 else f"{aside}-{n}"
            try:
                os.stat(candidate, dir_fd=parent_fd, follow_symlinks=False)
                continue
            except FileNotFoundError:
                pass
            try:
                os.rename(name, candidate, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
            except OSError as exc:
                raise UnsafeExchangeCourse(_(
                    "not released to {student}: {where} is {kind} of {owner}, not a folder "
                    "of the instructor's, and could not be set aside ({error}); remove it "
                    "and run the command again").format(student=student, where=where,
                                                         kind=kind, owner=owner,
                                                         error=exc)) from exc
            notes.append(_("{where} was {kind} of {owner}, not a folder of the instructor's: "
                           "set aside as {aside}, a new one made for {student}; check who "
                           "made it").format(where=where, kind=kind, owner=owner,
                                             aside=candidate, student=student))
            break
        else:
            raise UnsafeExchangeCourse(_(
                "not released to {student}: {where} is {kind} of {owner} and no free name "
                "was found to set it aside").format(student=student, where=where, kind=kind,
                                                    owner=owner))
    raise UnsafeExchangeCourse(_("not released to {student}: {where} keeps changing; run the "
                                 "command again").format(student=student, where=where))


def _reserve_for_student(course_fd: int, student: str, where: str) -> None:
    """Make the open exchange course folder ``course_fd`` reachable by the unix user
    ``student`` alone (and the instructor, its owner): its group becomes the student's
    own group and its mode 0750, so that no other student can list, fetch from or hand
    in to it. Nothing changes when the machine has no user of that name (one unix user
    for the whole class, or ids that are not logins: the README says what that leaves).

    Raises:
        UnsafeExchangeCourse: the student's primary group is shared with another user,
            or the folder's group cannot be changed (the instructor is neither root nor
            a member of that group); the message names ``student`` and ``where``.
    """
    import grp
    import pwd

    try:
        entry = pwd.getpwnam(student)
    except KeyError:
        return
    gid = entry.pw_gid
    try:
        members = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        members = set()
    others = sorted((members | {p.pw_name for p in pwd.getpwall() if p.pw_gid == gid})
                    - {student})
    if others:
        raise UnsafeExchangeCourse(_(
            "not released to {student}: the group of unix user {student} is shared with "
            "{others}, so {where} cannot be made {student}'s alone; give the student a "
            "group of their own").format(student=student, others=", ".join(others),
                                         where=where))
    try:
        os.fchown(course_fd, -1, gid)
        os.fchmod(course_fd, 0o750)
    except OSError as exc:
        raise UnsafeExchangeCourse(_(
            "not released to {student}: {where} could not be made readable by {student} "
            "alone ({error}); run the command as a user who may give the folder to the "
            "student's group").format(student=student, where=where, error=exc)) from exc


def write_decision(folder: Path, decision: dict[str, Any]) -> None:
    """Write the instructor's decision ``decision`` (``{"released": True, "student",
    "threshold", "attention_score", ...}``) as ``DECISION_FILE`` in the released folder
    ``folder``, beside the notebook the student's gate runs in."""
    (Path(folder) / DECISION_FILE).write_text(json.dumps(decision, indent=1, sort_keys=True)
                                              + "\n", encoding="utf-8")


def release_to_exchange(release_dir: Path, exchange: str | Path, course: str,
                        config_dir: str | Path | None = None, student: str = "",
                        notes: list[str] | None = None,
                        decision: dict[str, Any] | None = None) -> Path:
    """Release the folder ``release_dir`` through nbgrader's exchange as assignment
    `training` of ``course`` (nbgrader's ``release_assignment``:
    ``<exchange>/<course>/outbound/training``, with the course's ``inbound`` for the
    submission), replacing an earlier release of that course.

    nbgrader releases ``<root>/release/<assignment>`` only; the folder is copied into
    that place in a private temporary course root, so that any folder (``--release``,
    whatever its name or parent) is released as `training`.

    The exchange root may be written by every user (nbgrader makes it 0777, with no
    sticky bit), and the course's name is known to all. Before nbgrader writes anything,
    ``<course>``, its ``outbound/``, ``inbound/`` and ``outbound/training`` are checked
    with ``lstat`` and opened with ``O_NOFOLLOW`` one under the other: each must be absent
    (then made here, with nbgrader's modes) or a real folder of this process's user.
    Anything else (a link, a file, another user's folder) is renamed to
    ``<name>.refused-<UTC time>`` and a fresh folder made (a sentence in ``notes``).
    nbgrader then writes through ``/proc/self/fd`` into the folder opened here, in a
    private root of its own, so a name swapped after the check is never followed.

    Args:
        release_dir: the released notebook folder (``release/training`` by default).
        exchange: the exchange root (created, 0777 as nbgrader makes it, if missing).
        course: the exchange course (``exchange_course``).
        config_dir: the folder whose ``nbgrader_config.py`` applies (its ``ignore``
            list, ...); default: the course root ``release_dir.parent.parent``.
        student: the student released to (for the messages).
        notes: a list that gets a sentence for the instructor per folder set aside.
        decision: the instructor's decision, written as ``DECISION_FILE`` beside the
            released notebook (``write_decision``), or None.

    Returns:
        The outbound folder written.

    Raises:
        UnsafeExchangeCourse: a folder of the course is not the instructor's and could
            not be set aside (the message names the student and the path).
        nbgrader.exchange.ExchangeError: when nbgrader cannot write the exchange.
        OSError: when ``release_dir`` cannot be read.
    """
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeReleaseAssignment

    notes = notes if notes is not None else []
    config_root = Path(config_dir) if config_dir else Path(release_dir).parent.parent
    config = _exchange_config(config_root, course, exchange)
    shared = bool(CourseDirectory(config=config).groupshared)
    group = 0o2020 if shared else 0
    exchange = Path(exchange)
    if not exchange.exists():  # as nbgrader's ensure_root
        exchange.mkdir(parents=True)
        os.chmod(exchange, 0o777 | group)
    opened: list[int] = []
    try:
        root_fd = os.open(exchange, os.O_RDONLY | os.O_DIRECTORY)
        opened.append(root_fd)
        course_fd = _pinned_folder(root_fd, course, 0o755 | group, str(exchange / course),
                                   student, notes)
        opened.append(course_fd)
        _reserve_for_student(course_fd, student, str(exchange / course))
        outbound_fd = _pinned_folder(course_fd, "outbound", 0o755 | group,
                                     str(exchange / course / "outbound"), student, notes)
        opened.append(outbound_fd)
        opened.append(_pinned_folder(course_fd, "inbound", 0o2733 | (0o040 if shared else 0),
                                     str(exchange / course / "inbound"), student, notes))
        try:  # an earlier release, replaced by nbgrader (force): checked the same way
            os.stat(ASSIGNMENT, dir_fd=outbound_fd, follow_symlinks=False)
            opened.append(_pinned_folder(outbound_fd, ASSIGNMENT, 0o755 | group,
                                         str(exchange / course / "outbound" / ASSIGNMENT),
                                         student, notes))
        except FileNotFoundError:
            pass
        with tempfile.TemporaryDirectory(prefix="unlock-training-") as staging:
            shutil.copytree(release_dir, Path(staging) / "release" / ASSIGNMENT,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__",
                                                          DECISION_FILE))
            if decision is not None:
                write_decision(Path(staging) / "release" / ASSIGNMENT, decision)
            # nbgrader's root: a private folder (the staging folder is 0700) holding the
            # course as a link to the folder opened above.
            private_root = Path(staging) / "exchange"
            private_root.mkdir()
            os.chmod(private_root, 0o777 | (0o2000 if shared else 0))  # nbgrader's mode
            (private_root / course).symlink_to(f"/proc/self/fd/{course_fd}")
            if not (private_root / course).is_dir():  # no /proc: the checked path itself
                (private_root / course).unlink()
                private_root = exchange
            config.Exchange.root = str(private_root)
            config.CourseDirectory.root = staging
            config.CourseDirectory.release_directory = "release"
            config.ExchangeReleaseAssignment.force = True
            coursedir = CourseDirectory(config=config)
            ExchangeReleaseAssignment(coursedir=coursedir, authenticator=None,
                                      config=config).start()
    finally:
        for fd in opened:
            os.close(fd)
    return exchange / course / "outbound" / ASSIGNMENT


def exchange_course_problem(exchange: str | Path, course: str) -> str | None:
    """Why the exchange course ``course`` (or its ``inbound/``) is not a real folder owned
    by this process's user (read with ``lstat``, no link followed), or None when it is."""
    import stat as stat_

    for path in (Path(exchange) / course, Path(exchange) / course / "inbound"):
        try:
            st = os.lstat(path)
        except OSError as exc:
            return f"{path}: {exc.strerror}"
        if not stat_.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return _("{path} is not a folder of the instructor's (owner {owner})").format(
                path=path, owner=_owner_name(st.st_uid))
    return None


def collect_from_exchange(root: Path, exchange: str | Path, students: dict,
                          db_url: str | None = None) -> list[str]:
    """nbgrader's ``collect --update`` of `training` from each unlocked student's own
    exchange course into ``<root>/submitted/<student>/training/``.

    Args:
        root: the course root.
        exchange: the exchange root.
        students: the ledger's ``{student: record}``; records with an
            ``"exchange_course"`` are collected from that course.
        db_url: the gradebook (nbgrader's collect reads the assignment's due date there).

    Returns:
        The students whose submission folder is in ``submitted/`` after the run, sorted.
    """
    from nbgrader.coursedir import CourseDirectory

    from grader_tests.exchange import ExchangeCollect  # follows no link of the inbound

    collected = []
    for student, record in sorted(students.items()):
        course = record.get("exchange_course")
        if not course or unsafe_student_id(student) or \
                not (Path(exchange) / course / "inbound").is_dir():
            continue
        problem = exchange_course_problem(exchange, course)
        if problem:  # a link or another user's folder: nothing read through it
            print(_("not collected from {student}'s exchange course: {problem}").format(
                student=visible(student), problem=visible(problem)), file=sys.stderr)
            continue
        config = _exchange_config(root, course, exchange, db_url)
        config.CourseDirectory.student_id = student
        config.ExchangeCollect.update = True
        coursedir = CourseDirectory(config=config)
        ExchangeCollect(coursedir=coursedir, authenticator=None, config=config).start()
        if (root / "submitted" / student / ASSIGNMENT).is_dir():
            collected.append(student)
    return collected


def parse_threshold(text: object) -> Threshold:
    """``("full", None)``, ``("points", x)`` or ``("percent", x)`` from the CLI text.

    Raises:
        ValueError: for anything else, or a negative number.
    """
    text = str(text).strip().lower()
    if text in ("full", "max", "100%"):
        return ("full", None)
    kind = "percent" if text.endswith("%") else "points"
    try:
        value = float(text[:-1] if kind == "percent" else text)
    except ValueError:  # not a number: said as below, not as float() says it
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(_("threshold must be 'full', a number of points or a percentage: "
                           "{text!r}").format(text=text))
    return (kind, value)


def required_score(threshold: Threshold, max_score: float) -> float:
    """Points needed out of ``max_score`` for a ``parse_threshold`` value.

    Raises:
        ValueError: a threshold other than ``("full", None)`` without a number.
    """
    kind, value = threshold
    if kind == "full":
        return float(max_score)
    if value is None:  # parse_threshold gives a number with every kind but "full"
        raise ValueError(f"threshold {threshold!r} has no number")
    if kind == "percent":
        return float(max_score) * value / 100.0
    return float(value)


def describe_threshold(threshold: Threshold, max_score: float) -> str:
    """The threshold in words, with the points it needs out of ``max_score``."""
    kind, value = threshold
    need = required_score(threshold, max_score)
    if kind == "full":
        return _("full marks ({need:g} / {max_score:g})").format(need=need, max_score=max_score)
    if kind == "percent":
        return _("{value:g} % of {max_score:g} = {need:.2f} points").format(value=value,
                   max_score=max_score, need=need)
    return _("{need:.2f} / {max_score:g} points").format(need=need, max_score=max_score)


def review_pending(submission: Any) -> str | None:
    """Why a submission waits for the instructor's review, or None.

    Args:
        submission: an ``nbgrader.api.SubmittedAssignment`` of `attention` (its
            notebooks' ``flagged`` and the ``needs_manual_grade`` of its hidden-check
            grades are read).

    Returns:
        None, or a str naming the flagged notebooks and the hidden-check cells that need a
        manual grade (the start of the ``"flagged for review: ..."`` reason).
    """
    flagged = sorted(notebook.name for notebook in submission.notebooks if notebook.flagged)
    pending = sorted(grade.name for notebook in submission.notebooks
                     for grade in notebook.grades
                     if grade.name in HIDDEN_CHECKS and grade.needs_manual_grade)
    parts = []
    if flagged:
        parts.append(_("notebook {items} flagged in the gradebook (the graders saw tampering, or "
                       "its last file could not be graded)").format(items=', '.join(flagged)))
    if pending:
        shown = ", ".join(pending[:3]) + (_(" and {count} more").format(
            count=len(pending) - 3) if len(pending) > 3 else "")
        parts.append(ngettext("{count} hidden-check cell needs a manual grade ({cells})",
                              "{count} hidden-check cells need a manual grade ({cells})",
                              len(pending)).format(count=len(pending), cells=shown))
    return "; ".join(parts) or None


def decide(gradebook: Any, threshold: tuple[str, float | None]) -> list[dict]:
    """Every student of the gradebook with a verdict.

    A student whose `attention` submission waits for review (``review_pending``) is never
    eligible, whatever the score: the reason starts with ``"flagged for review: "``. The
    score judged is the one after nbgrader's late penalty (``SubmittedAssignment.score``
    less its ``late_submission_penalty``: the ``score`` of ``grades.csv``).

    Args:
        gradebook: an open ``nbgrader.api.Gradebook``.
        threshold: a ``parse_threshold`` value.

    Returns:
        list of dicts ``{"student", "eligible" (bool), "score" (points after the late
        penalty), "max_score", "reason"}``, sorted by student id.

    Raises:
        LookupError: if the gradebook has no assignment `attention`.
    """
    from nbgrader.api import MissingEntry

    try:
        assignment = gradebook.find_assignment(GATE_ASSIGNMENT)
    except MissingEntry:
        raise LookupError(_("the gradebook has no assignment {assignment!r}: release and "
                            "autograde it first").format(assignment=GATE_ASSIGNMENT)) from None
    max_score = float(assignment.max_score)
    need = required_score(threshold, max_score)
    verdicts = []
    for student in sorted(gradebook.students, key=lambda s: s.id):
        entry = {"student": student.id, "eligible": False, "score": None,
                 "max_score": max_score}
        try:
            submission = gradebook.find_submission(GATE_ASSIGNMENT, student.id)
        except MissingEntry:
            entry["reason"] = _("no {assignment} submission in the gradebook").format(
                assignment=GATE_ASSIGNMENT)
            verdicts.append(entry)
            continue
        # the score after nbgrader's late penalty: the one grades.csv and formgrader show
        penalty = float(submission.late_submission_penalty or 0.0)
        score = float(submission.score) - penalty
        entry["score"] = score
        autograded = any(grade.auto_score is not None or grade.manual_score is not None
                         for notebook in submission.notebooks for grade in notebook.grades)
        review = review_pending(submission)
        if review and (autograded or any(nb.flagged for nb in submission.notebooks)):
            # (cells of a submission never graded wait for the autograder, not a review)
            entry["reason"] = (_("flagged for review: {review}; {assignment} scored "
                                 "{score:.2f} / {max_score:g} so far; it stays locked until the "
                                 "review in formgrader grades those cells and clears the flag").format(review=review,
                                   assignment=GATE_ASSIGNMENT, score=score,
                                   max_score=max_score))
        elif not autograded:
            entry["reason"] = _("{assignment} submitted but not graded: autograde has not run on it "
                                "yet, or could not grade it (its log says why)").format(
                assignment=GATE_ASSIGNMENT)
        elif submission.needs_manual_grade:
            entry["reason"] = (_("{assignment} has cells waiting for manual grading (score "
                                 "so far {score:.2f} / {max_score:g})").format(
                                     assignment=GATE_ASSIGNMENT,
                                   score=score, max_score=max_score))
        elif score + 1e-9 >= need:
            entry["eligible"] = True
            entry["reason"] = _("{assignment} scored {score:.2f} / {max_score:g}").format(
                assignment=GATE_ASSIGNMENT,
                                  score=score, max_score=max_score)
        elif penalty > 0 and score + penalty + 1e-9 >= need:  # held back by the penalty
            entry["reason"] = (_("{assignment} scored {score:.2f} / {max_score:g} after a late "
                                 "penalty of {penalty:.2f} points ({raw:.2f} before it), needs "
                                 "{need:.2f}").format(assignment=GATE_ASSIGNMENT, score=score,
                                   max_score=max_score, penalty=penalty, raw=score + penalty,
                                   need=need))
        else:
            entry["reason"] = (_("{assignment} scored {score:.2f} / {max_score:g}, needs "
                                 "{need:.2f}").format(assignment=GATE_ASSIGNMENT, score=score,
                                   max_score=max_score, need=need))
        verdicts.append(entry)
    return verdicts


def save_ledger(path: Path, ledger: dict[str, Any]) -> None:
    """Write ``ledger`` to ``path`` as JSON, atomically (a temporary file, then renamed).

    The temporary file is a fresh name ``tempfile.mkstemp`` makes in the ledger's folder,
    never a name fixed in advance: the folder also holds one folder per student id, and no
    id can take the temporary file's place.

    Raises:
        OSError: when the folder or the file cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(json.dumps(ledger, indent=1, sort_keys=True) + "\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def unsafe_student_id(student: object) -> str | None:
    """Why the gradebook's student id ``student`` cannot name a folder of ``unlocked/``
    (nor an exchange course), or None when it can: the kit's rule for a student id
    (``student_ids.student_id_problem``) and not the ledger's name.

    Returns:
        None, or the reason as a str in the current language.
    """
    from .student_ids import student_id_problem

    problem = student_id_problem(student)
    if problem is not None:
        return _("the student id is refused: {why}").format(why=problem)
    text = str(student)
    if text == LEDGER:
        return _("the student id is the name of the ledger {ledger}").format(ledger=LEDGER)
    return None


def unlock(gradebook: Any, release_dir: Path, unlocked_dir: Path, threshold: Threshold,
           dry_run: bool = False, now: str | None = None, exchange: str | Path | None = None,
           course_id: str | None = None, config_dir: str | Path | None = None,
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Release `training` to every eligible student not released to before.

    Args:
        gradebook: an open ``nbgrader.api.Gradebook``.
        release_dir: Path of ``release/training``.
        unlocked_dir: Path of ``unlocked`` (one folder per student, plus the ledger).
        threshold: a ``parse_threshold`` value.
        dry_run: report only, write nothing.
        now: ISO timestamp to record (default: the current UTC time).
        exchange: nbgrader's exchange root, or None: each eligible student's release also
            goes there, to their course ``exchange_course(course_id, student)``.
        course_id: the course id (required with ``exchange``).
        config_dir: the folder whose ``nbgrader_config.py`` the exchange transfer reads
            (default: ``release_dir.parent.parent``).

    Returns:
        ``(newly, already, locked)``: lists of verdict dicts (see ``decide``).

    Raises:
        ValueError: ``exchange`` given without ``course_id``.
    """
    if exchange and not course_id:
        raise ValueError("an exchange needs the course id (the students' courses are named "
                         "after it)")
    verdicts = decide(gradebook, threshold)
    ledger_path = unlocked_dir / LEDGER
    ledger = load_ledger(ledger_path)
    now = now or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    newly, already, locked = [], [], []
    for verdict in verdicts:
        student = verdict["student"]
        if student in ledger["students"]:
            already.append(verdict)
        elif verdict["eligible"] and unsafe_student_id(student):  # never used as a path
            locked.append(dict(verdict, reason=_("{reason}, but not released: {why}").format(
                reason=verdict["reason"], why=unsafe_student_id(student))))
        elif verdict["eligible"]:
            newly.append(verdict)
            if not dry_run:
                try:  # (one student's failure is reported; the others are released)
                    target = unlocked_dir / student / ASSIGNMENT
                    if target.exists():  # a folder left by an interrupted run: replace it
                        shutil.rmtree(target)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copytree(release_dir, target,
                                    ignore=shutil.ignore_patterns(".ipynb_checkpoints",
                                                                  "__pycache__", DECISION_FILE))
                    record = {
                        "unlocked_at": now, "attention_score": verdict["score"],
                        "attention_max_score": verdict["max_score"],
                        "threshold": describe_threshold(threshold, verdict["max_score"]),
                        "folder": str(Path(student) / ASSIGNMENT)}
                    decision = {"released": True, "student": student, "assignment": ASSIGNMENT,
                                **{key: record[key] for key in (
                                    "unlocked_at", "attention_score", "attention_max_score",
                                    "threshold")}}
                    write_decision(target, decision)
                    if exchange and course_id:  # course_id is set whenever exchange is
                        record["exchange_course"] = exchange_course(course_id, student)
                        notes: list[str] = []
                        try:
                            release_to_exchange(release_dir, exchange, record["exchange_course"],
                                                config_dir, student=student, notes=notes,
                                                decision=decision)
                        except Exception as exc:  # noqa: BLE001  (ExchangeError, OSError)
                            # not in the ledger: the next run releases to this student again
                            newly.pop()
                            locked.append(dict(verdict, reason="; ".join([
                                _("{reason}, but the release to the exchange ({exchange}) failed: "
                                  "{error}; run the command again").format(
                                      reason=verdict['reason'], exchange=exchange, error=exc),
                                *notes])))
                            continue
                        if notes:  # folders set aside: kept in the record, shown in the report
                            record["exchange_notes"] = notes
                            verdict["reason"] = "; ".join([verdict["reason"], *notes])
                    ledger["students"][student] = record
                    save_ledger(ledger_path, ledger)  # after each copy: a stop loses nothing
                except OSError as exc:  # (shutil.Error too) a folder or the ledger unwritable
                    ledger["students"].pop(student, None)
                    if newly and newly[-1] is verdict:
                        newly.pop()
                    locked.append(dict(verdict, reason=_(
                        "{reason}, but the release failed: {error}; run the command "
                        "again").format(reason=verdict["reason"], error=exc)))
        else:
            locked.append(verdict)
    return newly, already, locked


def command_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser, its help in the current language
    (``grader_tests.i18n.use_language``); ``prog`` names the command in its usage (None:
    the script's file name, ``unlock_training.py``)."""
    parser = ArgumentParser(prog=prog, description=_("The instructor's gate: release assignment "
                                          "`training` to the students who passed "
                                          "`attention`."))
    parser.add_argument("--threshold", default="full",
                        help=_("'full' (default), a number of points, or a percentage like "
                               "95%%"))
    parser.add_argument("--db", help=_("gradebook URL (default: CourseDirectory.db_url of "
                                       "nbgrader_config.py)"))
    parser.add_argument("--root", help=_("course root (default: CourseDirectory.root of "
                                         "nbgrader_config.py, else the current directory)"))
    parser.add_argument("--release", help=_("folder to hand out (default: "
                                            "ROOT/release/training, or "
                                            "CourseDirectory.release_directory of "
                                            "nbgrader_config.py)"))
    parser.add_argument("--unlocked", help=_("output folder (default: ROOT/unlocked)"))
    parser.add_argument("--exchange", help=_("nbgrader exchange root (default: Exchange.root "
                                             "of nbgrader_config.py)"))
    parser.add_argument("--no-exchange", action="store_true",
                        help=_("release into unlocked/ only, not through the exchange"))
    parser.add_argument("--collect", action="store_true",
                        help=_("collect the training submissions of the unlocked students "
                               "from their exchange courses into submitted/ (nbgrader collect "
                               "--update), then stop"))
    parser.add_argument("--dry-run", action="store_true",
                        help=_("report only; write nothing"))
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """The command line (``python tools/unlock_training.py``, ``python -m grader_tests
    unlock``) on ``argv`` (default ``sys.argv[1:]``), its usage naming ``prog``; returns the
    exit status: 0 ran (whoever was unlocked), 2 the gradebook or the release cannot be used
    (argparse's 2 for a bad option)."""
    with use_language(folder_language(os.getcwd())):  # the help in the course's language
        parser = command_parser(prog)
        args = parser.parse_args(argv)
    try:  # the report's language: the course's setting (the --root course's, else here)
        language = course_language(args.root or os.getcwd())
    except ValueError as exc:
        parser.error(str(exc))
    with use_language(language):
        return _run(args, parser)


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The command once its options are read, in the course's language."""
    try:
        threshold = parse_threshold(args.threshold)
    except ValueError as exc:
        parser.error(str(exc))
    if args.root and not os.path.isdir(args.root):
        print(not_a_course(args.root), file=sys.stderr)
        return 2
    db_url, configured_root, course_id = course_settings(os.getcwd())
    db_url = args.db or db_url
    root = Path(args.root or configured_root or os.getcwd())
    # The exchange of the course released from: with --root, that folder's own
    # nbgrader_config.py (none there: no exchange), else the current folder's.
    exchange = None if args.no_exchange else (
        args.exchange or exchange_root(args.root if args.root else os.getcwd()))
    if exchange and not course_id:
        print(_("no course id: set CourseDirectory.course_id in nbgrader_config.py (the exchange "
                "names each student's course after it), or pass --no-exchange"), file=sys.stderr)
        return 2
    if not db_url:
        problem = not_a_course(os.getcwd())
        print(_("no gradebook: pass --db or run from the course root, where nbgrader_config.py "
                "sets CourseDirectory.db_url") + (f". {problem}" if problem else ""),
              file=sys.stderr)
        return 2
    release_dir = Path(args.release) if args.release else \
        release_folder(root, args.root if args.root else os.getcwd())
    unlocked_dir = Path(args.unlocked) if args.unlocked else root / "unlocked"

    if args.collect:
        if not exchange:
            print(_("--collect needs the exchange (Exchange.root or --exchange)"), file=sys.stderr)
            return 2
        alembic_on_path()
        students = load_ledger(unlocked_dir / LEDGER)["students"]
        collected = collect_from_exchange(root, exchange, students, db_url)
        print(_("{assignment} submissions in {folder} of the {students} unlocked students "
                "({collected}): {names}").format(assignment=ASSIGNMENT, folder=root / 'submitted',
                                                 students=len(students), collected=len(collected),
                                                 names=visible(', '.join(collected)) or '-'))
        return 0

    if not (release_dir / f"{ASSIGNMENT}.ipynb").is_file():
        print(_("{release_dir} has no {assignment}.ipynb: run `nbgrader generate_assignment "
                "{assignment}` first").format(release_dir=release_dir, assignment=ASSIGNMENT),
              file=sys.stderr)
        return 2

    from nbgrader.api import Gradebook

    alembic_on_path()
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).is_file():
        print(_("no gradebook at {db_url}: autograde {assignment} first").format(
            db_url=db_url, assignment=GATE_ASSIGNMENT), file=sys.stderr)
        return 2
    try:
        with (Gradebook(db_url, course_id) if course_id else Gradebook(db_url)) as gradebook:
            newly, already, locked = unlock(gradebook, release_dir, unlocked_dir, threshold,
                                            dry_run=args.dry_run, exchange=exchange,
                                            course_id=course_id,
                                            config_dir=args.root or os.getcwd())
            max_score = float(gradebook.find_assignment(GATE_ASSIGNMENT).max_score)
    except LookupError as exc:
        print(str(exc), file=sys.stderr)
        return 2

    print(_("threshold: {assignment} at {threshold}; release: {release_dir}; "
            "exchange: {exchange}").format(assignment=GATE_ASSIGNMENT,
                                           threshold=describe_threshold(threshold, max_score),
                                           release_dir=release_dir,
                                           exchange=exchange or _("none (unlocked/ only)")))
    print((_("\nwould unlock now ({count}):") if args.dry_run else
           _("\nunlocked now ({count}):")).format(count=len(newly)))
    for v in newly:
        where = unlocked_dir / v["student"] / ASSIGNMENT
        print(f"  {visible(v['student']):42s} {visible(v['reason'])}  ->  {visible(where)}")
        if exchange and course_id:  # _run returned above when exchange has no course id
            course = exchange_course(course_id, v["student"])
            print(" " * 45 + _("exchange course {course} (JupyterHub group nbgrader-{course}): "
                               "the student runs `nbgrader fetch_assignment {assignment} "
                               "--course {course}`").format(course=visible(course),
                                                           assignment=ASSIGNMENT))
    print(_("\nalready unlocked, not released again ({already}):").format(already=len(already)))
    for v in already:
        print(f"  {visible(v['student']):42s} {visible(v['reason'])}")
    print(_("\nnot unlocked ({locked}):").format(locked=len(locked)))
    for v in locked:
        print(f"  {visible(v['student']):42s} {visible(v['reason'])}")
    return 0

