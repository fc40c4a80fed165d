"""Command line of the graders.

    python -m grader_tests grade PATH [--json] [--only NAME ...] [--in-process]
    python -m grader_tests batch [SUBMITTED] [--workers N] ...   (see batch.py)
    python -m grader_tests dashboard [--root COURSE] [--assignment A]   (see dashboard.py)
    python -m grader_tests unlock [--threshold T] [--collect] ...   (see unlock.py)

PATH is a filled-in notebook or a ``.py`` module defining the names of docs/contract.md §2
(assignment `attention`), or a filled-in `training` notebook (recognised by its gate cell;
``--assignment`` overrides). Its code runs in a sandbox process (``sandbox.py``: time and
memory limits, no access to the graders or the reference); ``--in-process`` runs it here
instead. For a `training` notebook the sandbox also runs its given cells, and the
reference model the checks hand the student's functions (an ``ops`` namespace) answers
from this process through callbacks. Without
``--json`` a plain-text report per graded name is printed; with it, one JSON
object ``{"score", "max_score", "functions": {NAME: {"score", "max_score", "checks":
[{"name", "passed", "fault", "message"}]}}, "cell_errors": [str], "flags": [str]}``
(``flags``: tampering the sandbox or the checks saw; ``"assignment"`` and ``"isolated"``
too). The exit status is 0 when grading ran
(whatever the score) and 2 when the submission could not be read.
"""

import argparse
import json
import os
import sys

from . import assignments
from .evidence import kit_cells
from .i18n import (LANGUAGES, ArgumentParser, _, course_language, folder_language,
                   use_language)
from .report import GradeReport, format_result, tampering_flags, visible
from .runner import grade_namespace
from .sandbox import grade_isolated
from .submission import (SubmissionError, assignment_of, code_of_notebook, load,
                         undefined_by_syntax)

ASSIGNMENTS = tuple(assignments.ASSIGNMENTS)


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``).

    Returns:
        int, the exit status: 0 graded, 2 the submission could not be read (or the batch's
        own statuses for ``batch``).
    """
    for stream in (sys.stdout, sys.stderr):  # a console that cannot show a character
        try:                                  # (cp1252 and a student's "√") gets "?"
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "batch":
        from .batch import main as batch_main

        return batch_main(argv[1:])
    if argv and argv[0] == "dashboard":
        from .dashboard import main as dashboard_main

        return dashboard_main(argv[1:])
    if argv and argv[0] == "unlock":
        from .unlock import main as unlock_main

        return unlock_main(argv[1:], prog="python -m grader_tests unlock")
    with use_language(folder_language(os.getcwd())):  # the help in the course's language
        args = parser().parse_args(argv)
    with use_language(args.language or course_language(os.getcwd())):
        return _grade(args)


def parser() -> argparse.ArgumentParser:
    """The command line's parser, its help in the current language (``i18n.use_language``).
    """
    parser = ArgumentParser(prog="python -m grader_tests",
                            description=_("Grade an attention or training submission."))
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help=_("grade one notebook or .py file"))
    g.add_argument("path")
    g.add_argument("--json", action="store_true", help=_("print one JSON object"))
    g.add_argument("--only", nargs="+", choices=[n for a in assignments.ASSIGNMENTS.values()
                            for n in a.graded_names],
                   metavar="NAME", help=_("grade only these names (put PATH first: "
                                          "grade PATH --only NAME ...)"))
    g.add_argument("--assignment", choices=ASSIGNMENTS, default=None,
                   help=_("which assignment PATH belongs to (default: a notebook with the "
                          "training gate cell is `training`, anything else `attention`)"))
    g.add_argument("--in-process", action="store_true",
                   help=_("run the submission in this process (faster, no isolation; for "
                          "trusted code such as the reference)"))
    g.add_argument("--unjailed", action="store_true",
                   help=_("where bubblewrap's jail cannot be made, run the submission in a "
                          "plain subprocess (it then runs as you: trusted code only)"))
    g.add_argument("--language", choices=LANGUAGES, default=None,
                   help=_("language of the report (default: c.AttentionKit.language of the "
                          "nbgrader_config.py of the current folder, else en)"))
    b = sub.add_parser("batch", help=_("grade a whole submitted/ folder into the gradebook"),
                       add_help=False)
    b.add_argument("rest", nargs=argparse.REMAINDER)
    d = sub.add_parser("dashboard", help=_("write the class dashboard (HTML, PNG and SVG "
                                           "figures) from the gradebook"), add_help=False)
    d.add_argument("rest", nargs=argparse.REMAINDER)
    u = sub.add_parser("unlock", help=_("release assignment training to the students whose "
                                        "attention grade is high enough"), add_help=False)
    u.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _grade(args: argparse.Namespace) -> int:
    if os.path.isdir(args.path):
        return _unreadable(args, _("{path} is a folder: give a notebook or a .py file (to "
                                   "grade every student of a submitted/ folder: python -m "
                                   "grader_tests batch)").format(path=args.path))
    if not os.path.isfile(args.path):
        return _unreadable(args, _("{path}: no such file").format(path=args.path))
    flags: list[str] = []
    try:
        assignment = assignments.get(args.assignment or assignment_of(args.path))
    except SubmissionError as exc:
        return _unreadable(args, str(exc))
    foreign = [n for n in args.only or () if n not in assignment.points]
    if foreign:
        return _unreadable(args, _("{names}: not graded in assignment {assignment}").format(
            names=", ".join(foreign), assignment=assignment.name))
    isolated = not args.in_process
    if not isolated:
        try:
            loaded = load(args.path, assignment=assignment.name, skip=kit_cells(args.path))
        except SubmissionError as exc:
            return _unreadable(args, str(exc))
        results = grade_namespace(loaded.namespace, args.only, assignment=assignment,
                                  undefined=undefined_by_syntax(args.path, assignment))
        cell_errors = loaded.cell_errors
        flags = tampering_flags(results)
    else:
        try:
            code_of_notebook(args.path) if not args.path.endswith(".py") else None
        except SubmissionError as exc:
            return _unreadable(args, str(exc))
        from .config import course_config
        from .jail import JailUnavailable, use_jail

        try:
            allowed = args.unjailed or bool(course_config(os.getcwd(), "AttentionKit").get(
                "allow_unjailed"))
            jailed = use_jail(allowed)
        except JailUnavailable as exc:
            return _unreadable(args, str(exc))
        results, cell_errors, flags = grade_isolated(args.path, args.only,
                                                     assignment=assignment, jailed=jailed)
    report = GradeReport(assignment.name, results, cell_errors, flags)
    if args.json:
        print(json.dumps({**report.to_json(), "isolated": isolated}, indent=1))
    else:
        for r in report.functions.values():
            print(format_result(r))
        print(_("\nTotal: {score:.2f} / {max_score:g}").format(score=report.score,
                                                              max_score=report.max_score))
        for err in report.cell_errors:
            print(_("note: {note}").format(note=visible(err)))  # (a student's message)
        for flag in report.flags:
            print(_("FLAG: {flag}").format(flag=visible(flag)))
    return 0


def _unreadable(args, message):
    if args.json:
        print(json.dumps({"error": message}))
    else:
        print(_("error: {error}").format(error=message), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
