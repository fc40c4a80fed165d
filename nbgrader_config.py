"""nbgrader configuration of the attention course kit.

nbgrader reads this file from the directory it is run in (the repository root), so every
``nbgrader ...`` command of the README and of ``tools/demo.py`` runs from here.
"""

import os

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearOutput,
                                    GetGrades, IgnorePattern, LimitOutput,
                                    NbGraderPreprocessor, OverwriteCells, OverwriteKernelspec,
                                    SaveAutoGrades)

from grader_tests.autograde import (FlagForReview, JailedExecute, JoinDuplicateCells,
                                   NoteChosenNotebook, TrustedGrades)
from grader_tests.feedback import SanitizeStudentMarkdown, finish_feedback_pages
from grader_tests.notebook_choice import stage_chosen_notebook

c = get_config()  # noqa: F821  (injected by traitlets when nbgrader loads this file)

ROOT = os.path.dirname(os.path.abspath(__file__))

# --- The course ---------------------------------------------------------------------------
c.CourseDirectory.course_id = "attention-kit"
c.CourseDirectory.root = ROOT
# The gradebook: an sqlite file in the repository root (git-ignored; the demo deletes and
# rebuilds it on every run). An absolute path, so that the gradebook is the same whatever
# directory a command runs from.
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(ROOT, "gradebook.db")
# Files beside a notebook that nbgrader never copies (into release/ or autograded/):
# nbgrader's defaults, and the example database Hypothesis may leave where tests ran.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".hypothesis"]

# --- Executing submissions (autograde, validate) -----------------------------------------
# Seconds one cell may run before nbgrader interrupts the kernel and records an error in
# that cell (scored 0 if it is a grade cell). A grade cell (the hidden checks) gets
# ``GRADED_CELL_TIMEOUT``; the graders stop a student function after a few seconds on their
# own, so this is only the outer limit. Every other cell (setup, solutions, visible tests,
# the lesson's measurements) earns no points and gets ``UNGRADED_CELL_TIMEOUT``: on a
# correct submission each takes well under a second, the slowest lesson cell about 3 s,
# but a function that never returns would otherwise hold up the whole class's autograde
# for as long as every cell that calls it allows.
GRADED_CELL_TIMEOUT = 60
UNGRADED_CELL_TIMEOUT = 10


def cell_timeout(cell):
    """Seconds ``cell`` may run when nbgrader executes a notebook (autograde, validate)."""
    if cell.metadata.get("nbgrader", {}).get("grade"):
        return GRADED_CELL_TIMEOUT
    return UNGRADED_CELL_TIMEOUT


# Seconds of wall time for all of a notebook's cells together (the hidden checks are not
# run in the kernel: the jailed grader grades them apart). Past it, the remaining cells are
# not run and say so in the feedback (only a test cell whose points came from the kernel's
# run would still run, with the solution cells before it; this kit's notebooks have none),
# and the functions are graded as usual. The notebooks of the example class (submitted/)
# run their cells in 2 to 6 s each; without this limit, many cells each just under
# UNGRADED_CELL_TIMEOUT would hold the class's autograde for as long as the student likes.
NOTEBOOK_TIME_LIMIT = 120
c.JailedExecute.notebook_seconds = NOTEBOOK_TIME_LIMIT
# What the grader keeps of the kernel's output, all cells together: every kernel message
# counted whole (text, data, metadata, error messages and tracebacks, buffers), and a
# number of outputs; the rest is dropped with a note in the cell where it began.
c.JailedExecute.output_bytes = 4 * 2**20
c.JailedExecute.max_outputs = 2000
# The largest part of one kernel message the grader receives at all (the notebooks of the
# example class send 170 to 260 kB of messages in all, no output above 5 kB): ZeroMQ drops
# a larger one unread, and its cell ends as one that ran out of time.
c.JailedExecute.message_limit = 16 * 2**20
c.Execute.timeout = GRADED_CELL_TIMEOUT  # what nbclient uses where no cell is at hand
c.Execute.timeout_func = cell_timeout
c.Execute.interrupt_on_timeout = True
# Seconds to wait for a kernel to start (a cold start in a fresh virtual environment is
# slower than later ones).
c.Execute.startup_timeout = 120

# --- Autograde ----------------------------------------------------------------------------


class RestoreDeletedGradeCells(OverwriteCells):
    """``OverwriteCells`` that puts a deleted grade cell back after the nearest earlier
    cell of the instructor notebook that the submission still has.

    nbgrader 0.9.6 looks only at the cell just before the deleted one and expects it to be
    a grade or solution cell; in this kit that cell is a locked visible-test cell, and
    nbgrader stops with ``KeyError: 'softmax_visible_test'``. The restored cell is
    nbgrader's own (``missing_cell_transform``: the instructor's source, a note that it
    was added back, the points), with an id in an nbformat 4.5 notebook and none in an
    older one, so that the notebook stays valid in its own format version.
    """

    def add_missing_grade_cells(self, nb, resources):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [cell.name for cell in source_nb.source_cells]  # the instructor's cell order
        source = {cell.name: cell for cell in source_nb.source_cells}
        solutions = {cell.name for cell in source_nb.solution_cells}
        for grade_cell in source_nb.grade_cells:
            present = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]
            if grade_cell.name in present:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", grade_cell.name)
            cell = self.missing_cell_transform(source[grade_cell.name], grade_cell.max_score,
                                               is_solution=grade_cell.name in solutions)
            if (nb.nbformat, nb.nbformat_minor) >= (4, 5):  # cell ids exist from 4.5 on
                cell["id"] = grade_cell.name
            else:
                cell.pop("id", None)
            earlier = order[:order.index(grade_cell.name)]
            at = next((present.index(name) + 1 for name in reversed(earlier) if name in present), 0)
            nb.cells.insert(at, cell)
        return nb, resources


# A student who deleted a grade cell gets it back and it is graded as usual.
c.OverwriteCells.add_missing_cells = True
# Cells that carry the same nbgrader id (duplicated, split in JupyterLab) are joined and
# graded as written (JoinDuplicateCells), where nbgrader's DeduplicateIds would drop the
# student from the autograde.
c.Autograde.sanitize_preprocessors = [
    ClearOutput, JoinDuplicateCells, OverwriteKernelspec, RestoreDeletedGradeCells,
    CheckCellMetadata,
]
# nbgrader's own autograde steps, with two replaced and one added (grader_tests/autograde.py):
# the notebook runs in a kernel in the jail (JailedExecute), the points of every hidden cell
# come from the jailed grader, whatever the kernel printed (TrustedGrades), and a submission
# the grader flagged waits for review (FlagForReview: notebook flagged, hidden cells
# needing a manual grade, the training gate closed).
c.Autograde.autograde_preprocessors = [
    NoteChosenNotebook, JailedExecute, TrustedGrades, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, FlagForReview, AssignLatePenalties, CheckCellMetadata,
]

# A submission folder whose notebook was renamed (``attention (1).ipynb``) or that holds
# several notebooks: the one with the most answered solution cells is graded, under the
# assignment's name, with a first cell saying so and naming the others (NoteChosenNotebook);
# the batch uses the same rule (grader_tests/notebook_choice.py). Nothing handed in is
# lost: a file the hook must displace, and symbolic links, go to .grading_chosen/.
c.Autograde.pre_convert_hook = stage_chosen_notebook

# --- The jail -----------------------------------------------------------------------------
# Student code runs only in bubblewrap's jail (grader_tests/jail.py): autograde, the grade
# and batch commands, Dask workers. Where bubblewrap cannot run (macOS, Windows, a container
# without namespaces), grading stops with one line saying what to install. Setting this to
# True grades there anyway, in plain processes: the student's code then runs as you, can
# read and write your files and reach the network. Only for code you trust.
c.AttentionKit.allow_unjailed = False
# The third-party modules a student's code may import when graded (Python's standard
# library always may). An import of anything else is reported as `module-unavailable` and
# the rest is graded; the notebooks state this list and Validate checks it (rebuild the
# notebooks with `python tools/build_notebooks.py` after changing it).
c.AttentionKit.allowed_modules = ["numpy", "matplotlib"]

# --- Feedback ----------------------------------------------------------------------------


class DropHiddenTestMarkers(NbGraderPreprocessor):
    """Feedback only: drop the ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` lines
    of the grade cells, from their source and from the tracebacks they show. A hidden cell
    then shows what it is, a one-line call into the graders, and its output, the graders'
    report for the student."""

    markers = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")

    def without_markers(self, text):
        return "\n".join(line for line in text.split("\n")
                         if not any(m in line for m in self.markers))

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            cell.source = self.without_markers(cell.source)
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [self.without_markers(t) for t in output["traceback"]]
        return cell, resources


c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, DropHiddenTestMarkers,
                                    SanitizeStudentMarkdown]
# The feedback page is nbgrader's, finished by grader_tests/feedback.py: its summary names
# each part by its function instead of "Test cell", and the graders' report lines wrap
# inside the page.
c.GenerateFeedback.post_convert_hook = finish_feedback_pages
# What a student wrote is shown as text, never run as a page's script: markdown, displayed
# HTML and outputs of the notebook are sanitised in the feedback page (and the formgrader).
c.HTMLExporter.sanitize_html = True

# --- The exchange and collecting submissions ----------------------------------------------
# nbgrader's exchange (release_assignment, fetch_assignment, submit, collect,
# release_feedback, fetch_feedback) goes through one folder that instructor and students can
# all reach. By default it is `exchange/` in this course folder (git-ignored; nbgrader's own
# default, /usr/local/share/nbgrader/exchange, is not writable on most machines): right for
# students who work on this same machine or file system, and for trying the whole cycle.
# Students' nbgrader must point at the same folder (their own configuration, or
# `--Exchange.root=...` on each command): see the README, "The exchange".
# On a JupyterHub whose exchange is shared by every course, replace the line below by:
#     c.Exchange.root = "/srv/nbgrader/exchange"
c.Exchange.root = os.path.join(ROOT, "exchange")

# `nbgrader zip_collect ASSIGNMENT` takes the files a learning platform's "download all
# submissions" produced (zip archives in downloaded/ASSIGNMENT/archive/, or the files in
# downloaded/ASSIGNMENT/extracted/) and files each under submitted/<student>/ASSIGNMENT/.
# The student and the notebook come from the file name; this pattern is Canvas's:
#     <student>_<user id>_<attachment id>_<notebook>.ipynb
# with `LATE_` before the user id for a late submission and `-1`, `-2`, ... after the
# notebook's name for a resubmission, e.g. `doejane_LATE_48213_1190044_attention-1.ipynb`
# goes to submitted/doejane/attention/attention.ipynb. <student> (Canvas's sortable name,
# lower case, no spaces) is the student's id in the gradebook. A file that does not match
# is skipped with a warning and the others are collected.
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9.\-]+)_(?:LATE_)?[0-9]+_[0-9]+_"
    r"(?P<file_id>attention|training)(?:-[0-9]+)?\.ipynb$"
)
