"""Command line of the graders.

    python -m grader_tests grade PATH [--json] [--only NAME ...] [--in-process]
    python -m grader_tests batch [SUBMITTED] [--workers N] ...   (see batch.py)

PATH is a filled-in notebook or a ``.py`` module defining the names of SPEC section 1.
Its code runs in a sandbox process (``sandbox.py``: time and memory limits, no access
to the graders or the reference); ``--in-process`` runs it here instead. Without
``--json`` a plain-text report per graded name is printed; with it, one JSON
object ``{"score", "max_score", "functions": {NAME: {"score", "max_score", "checks":
[{"name", "passed", "fault", "message"}]}}, "cell_errors": [str], "flags": [str]}``
(``flags``: tampering the sandbox saw). The exit status is 0 when grading ran
(whatever the score) and 2 when the submission could not be read.
"""

import argparse
import json
import os
import sys

from .core import POINTS, format_result, grade_namespace, report_dict
from .sandbox import grade_isolated
from .submission import SubmissionError, code_of_notebook, load


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m grader_tests",
                                     description="Grade an attention submission.")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade one notebook or .py file")
    g.add_argument("path")
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.add_argument("--only", nargs="+", choices=list(POINTS), metavar="NAME",
                   help="grade only these names")
    g.add_argument("--in-process", action="store_true",
                   help="run the submission in this process (faster, no isolation; for "
                        "trusted code such as the reference)")
    b = sub.add_parser("batch", help="grade a whole submitted/ folder into the gradebook",
                       add_help=False)
    b.add_argument("rest", nargs=argparse.REMAINDER)
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "batch":
        from .batch import main as batch_main

        return batch_main(argv[1:])
    args = parser.parse_args(argv)

    if not os.path.isfile(args.path):
        return _unreadable(args, f"{args.path}: no such file")
    flags = []
    if args.in_process:
        try:
            loaded = load(args.path)
        except SubmissionError as exc:
            return _unreadable(args, str(exc))
        results = grade_namespace(loaded.namespace, args.only)
        cell_errors = loaded.cell_errors
    else:
        try:
            code_of_notebook(args.path) if not args.path.endswith(".py") else None
        except SubmissionError as exc:
            return _unreadable(args, str(exc))
        results, cell_errors, flags = grade_isolated(args.path, args.only)
    if args.json:
        report = report_dict(results)
        report["cell_errors"] = cell_errors
        report["flags"] = flags
        print(json.dumps(report, indent=1))
    else:
        for r in results.values():
            print(format_result(r))
        total = sum(r.score for r in results.values())
        top = sum(r.max_score for r in results.values())
        print(f"\nTotal: {total:.2f} / {top:g}")
        for err in cell_errors:
            print(f"note: a cell failed while loading: {err}")
        for flag in flags:
            print(f"FLAG: {flag}")
    return 0


def _unreadable(args, message):
    if args.json:
        print(json.dumps({"error": message}))
    else:
        print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
