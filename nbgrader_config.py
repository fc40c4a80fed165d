"""nbgrader configuration of the attention course kit.

nbgrader reads this file from the directory it is run in (the repository root), so every
``nbgrader ...`` command of the README runs from here. The example class of ``make demo``
is a course of its own, ``example/``, whose ``nbgrader_config.py`` loads this file and then
sets its own course id, root and gradebook.
"""

import math
import os
import re

import grader_tests
import nbformat
import nbgrader

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.api import MissingEntry
from nbgrader.converters import GenerateAssignment
from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests,
                                    ClearOutput, ClearSolutions, GetGrades, IgnorePattern, LimitOutput,
                                    OverwriteCells, OverwriteKernelspec, SaveAutoGrades)
from traitlets import Float

from authoring.notebook_language import LanguageClearSolutions
from grader_tests.autograde import (FlagForReview, JailedExecute, JoinDuplicateCells,
                                   NoteChosenNotebook, TrustedGrades)
from grader_tests.feedback import (FeedbackLabels, FeedbackPreprocessor,
                                   SanitizeStudentMarkdown, finish_feedback_pages)
from grader_tests.notebook_choice import stage_chosen_notebook

c = get_config()  # noqa: F821  (injected by traitlets when nbgrader loads this file)

ROOT = os.path.dirname(os.path.abspath(__file__))

# --- The course ---------------------------------------------------------------------------
c.CourseDirectory.course_id = "attention-kit"
c.CourseDirectory.root = ROOT
# The gradebook: an sqlite file in the repository root (git-ignored; never touched by the
# demo, which grades the example class into example/gradebook.db). An absolute path, so
# that the gradebook is the same whatever directory a command runs from.
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
# What the kernel may send the grader, all cells and sockets together, every byte counted
# at the socket before it is read (text, data, metadata, error messages and tracebacks,
# buffers): past it the kernel is stopped and its cell says so. And the number of outputs
# kept; the rest is dropped with a note in the cell where it began.
c.JailedExecute.output_bytes = 4 * 2**20
c.JailedExecute.max_outputs = 2000
# The largest part of one kernel message the grader receives at all (the notebooks of the
# example class send 170 to 260 kB of messages in all, no output above 5 kB): the kernel
# sends a note of a larger output's size in its place (ZeroMQ would drop it unread), and the
# rest of the cell and of the notebook run.
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
    cell of the instructor notebook that the submission still has (known by its nbgrader
    id or, where the cells lost their metadata, by its text or the function it defines:
    ``recognised_cells``).

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
            ids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]
            if grade_cell.name in ids:
                continue
            present = self.recognised_cells(nb, source_nb)
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

    def recognised_cells(self, nb, source_nb):
        """The instructor's cell name of each of ``nb``'s cells, or None: its nbgrader id;
        for a cell that lost its metadata (saved by a front end that strips it), the
        instructor's cell whose source or released text it has, or the solution cell of
        the graded part it defines (``def softmax(`` at the start of a line); so that a
        restored cell goes back beside its part, not to the top."""
        texts = {}
        for cell in source_nb.source_cells:
            texts.setdefault(cell.source, cell.name)
            texts.setdefault(released_source(cell, parent=self), cell.name)
        parts = {cell.name[: -len("_solution")]: cell.name for cell in source_nb.solution_cells
                 if cell.name.endswith("_solution")}
        names = []
        for cell in nb.cells:
            name = cell.metadata.get("nbgrader", {}).get("grade_id")
            if not name and cell.get("source"):
                name = texts.get(cell.source)
                if name is None and cell.cell_type == "code":
                    name = next((solution for part, solution in parts.items() if re.search(
                        rf"^def[ \t]+{re.escape(part)}\b", cell.source, re.MULTILINE)), None)
            names.append(name)
        return names

    def preprocess_cell(self, cell, resources, index):
        """nbgrader's check of a locked cell, without its false alarm on hidden tests.

        nbgrader records a cell's checksum in the gradebook from the instructor's source,
        before ``generate_assignment`` clears the ``### BEGIN HIDDEN TESTS`` region, so a
        hidden-test cell exactly as released never matches it: nbgrader logs "Attribute
        'checksum' ... has changed!" for every such cell of every student (17 per
        notebook here; upstream nbgrader issue #1961) and puts the source back, which it
        would do anyway. A locked cell whose text is the released one (the source with
        its hidden tests cleared by nbgrader's own ``ClearHiddenTests``) is put back
        silently; any other change to a locked cell is still reported, and undone, by
        nbgrader.
        """
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id is not None:
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id,
                                                              self.assignment_id)
            except MissingEntry:
                source_cell = None  # nbgrader's own check reports it
            if source_cell is not None and source_cell.locked \
                    and cell.cell_type == source_cell.cell_type \
                    and cell.source != source_cell.source \
                    and cell.source == released_source(source_cell, parent=self):
                cell.source = source_cell.source
        return super().preprocess_cell(cell, resources, index)


def released_source(source_cell, parent=None):
    """The text ``nbgrader generate_assignment`` releases for the gradebook's
    ``source_cell`` (``nbgrader.api.SourceCell``): its source with the hidden-test region
    removed by nbgrader's ``ClearHiddenTests`` (with the course's delimiters); the source
    itself for a cell without one."""
    cell = nbformat.v4.new_code_cell(source_cell.source) if source_cell.cell_type == "code" \
        else nbformat.v4.new_markdown_cell(source_cell.source)
    ClearHiddenTests(parent=parent)._remove_hidden_test_region(cell)
    return cell.source


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

# A submission folder whose student id the kit's rule refuses (grader_tests/student_ids.py:
# a newline, a comma, a leading "=", ...) is left out of `nbgrader autograde` with an error
# naming it, and the rest of the class is graded (nbgrader's own would stop the whole run
# on a newline). A student whose notebook fails to autograde (a file cut off mid-save) has
# the gradebook's earlier scores withdrawn: "not graded" to export, the dashboard and the
# training gate, never the earlier file's grade. nbgrader has no setting for its autograde
# command's converter: the kit's (grader_tests.gradebook.autograde_converter) takes the
# place of nbgrader's class there.
import nbgrader.apps.autogradeapp  # noqa: E402

from grader_tests.gradebook import autograde_converter  # noqa: E402

nbgrader.apps.autogradeapp.Autograde = autograde_converter()

# --- Due dates and late submissions -------------------------------------------------------
# A due date is the assignment's, in the gradebook: `nbgrader db assignment add attention
# --duedate="2025-03-14T17:00:00+01:00"` or formgrader's "Manage Assignments" page. The kit
# reads it first (grader_tests/due_dates.py), on every path into the gradebook: ISO 8601
# with its offset or Z, nbgrader's "2025-03-14 16:00:00 UTC" or a zone name, or no zone,
# read in the course's timezone below; any other form is refused with a message (nbgrader
# would read "2025-03-14 17:00:00 +0100" as an offset of 100 seconds). COURSE_TIMEZONE is
# also what formgrader shows times in. When a
# student submitted is the `timestamp.txt` that `nbgrader submit` writes and `nbgrader
# collect` keeps beside the notebook. nbgrader's AssignLatePenalties (an autograde step
# above) asks the plugin below how many points a late notebook loses; `nbgrader export`
# and formgrader show the raw score, the penalty and what is left.


class LatePenaltyPerDay(LateSubmissionPlugin):
    """The kit's late policy: a late notebook loses ``fraction_per_day`` of its score for
    every day, or part of a day, after the due date: 10 % for up to 24 hours, 20 % up
    to 48 hours, ..., all of it from 10 days on (with the default 0.1)."""

    fraction_per_day = Float(0.1, help="Part of its score a notebook loses per day, or part "
                                       "of a day, that it is late.").tag(config=True)

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        """Points taken off ``score`` (points earned) for a notebook submitted
        ``total_seconds_late`` seconds after the due date; None when on time."""
        if total_seconds_late <= 0:
            return None
        days = math.ceil(total_seconds_late / 86400)
        return score * min(1.0, self.fraction_per_day * days)


c.AssignLatePenalties.plugin_class = LatePenaltyPerDay
c.LatePenaltyPerDay.fraction_per_day = 0.1

COURSE_TIMEZONE = "UTC"
c.NbGraderAPI.timezone = COURSE_TIMEZONE
# (Submission times stay in UTC, nbgrader's default c.Exchange.timezone: submit writes the
# zone's abbreviation, and one such as CEST is no zone nbgrader can read back.)

from grader_tests.due_dates import install_due_date_rule  # noqa: E402

install_due_date_rule(COURSE_TIMEZONE)

# A submission folder whose notebook was renamed (``attention (1).ipynb``) or that holds
# several notebooks: the one with the most answered solution cells is graded, under the
# assignment's name, with a first cell saying so and naming the others (NoteChosenNotebook);
# the batch uses the same rule (grader_tests/notebook_choice.py). Nothing handed in is
# lost: a file the hook must displace, and symbolic links, go to .grading_chosen/.
c.Autograde.pre_convert_hook = stage_chosen_notebook

# --- Exporting grades ---------------------------------------------------------------------
# `nbgrader export` writes grades.csv with nbgrader's columns and values, through the kit's
# exporter (grader_tests/export.py): every field quoted where it must be (a student id with
# a comma or a newline stays one cell, so the file reads back as one row per student), and
# every cell a student or a roster wrote (id, names, e-mail) that begins with = + - @ gets
# a leading apostrophe, so that a spreadsheet shows it as text, not as a formula.
c.ExportApp.plugin_class = "grader_tests.export.CourseCsvExport"

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
# notebooks with `python -m authoring.build_notebooks` after changing it).
c.AttentionKit.allowed_modules = ["numpy", "matplotlib"]
# The language of the released notebooks: "en" (English) or "it" (Italian). Each notebook
# is written once per language (notebooks/attention.py, notebooks/it/attention.py, ...),
# with the same cells, grade ids, points and graders: after changing it, rebuild the
# notebooks and the releases with `python -m tools.build_all`. Anything else stops the build.
c.AttentionKit.language = "en"
# nbgrader generate_assignment writes the solution stubs in that language
# (`# IL TUO CODICE QUI` in Italian): its ClearSolutions step, replaced by one that reads
# the setting above (a course's own c.ClearSolutions.code_stub still wins).
c.GenerateAssignment.preprocessors = [
    LanguageClearSolutions if step is ClearSolutions else step
    for step in GenerateAssignment.class_traits()["preprocessors"].default()]

# --- Feedback ----------------------------------------------------------------------------


class DropHiddenTestMarkers(FeedbackPreprocessor):
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
                                    SanitizeStudentMarkdown, FeedbackLabels]
# The feedback page is nbgrader's, finished by grader_tests/feedback.py: its summary names
# each part by its function instead of "Test cell", and the graders' report lines wrap
# inside the page.
c.GenerateFeedback.post_convert_hook = finish_feedback_pages
# What a student wrote is shown as text, never run as a page's script: displayed HTML and the
# other outputs of the notebook are sanitised by nbconvert in the feedback page and the
# formgrader (whose template leaves markdown cells alone: those are cleaned by the kit's
# markdown filter, below).
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
# Students can write in the exchange's inbound, and `nbgrader collect` copies from there
# with the instructor's rights: nbgrader's own copy follows symbolic links, so a link
# there would hand in any file the instructor can read. The kit's collect
# (grader_tests.exchange.ExchangeCollect, the same as nbgrader's but for the copy) copies
# regular files and folders only and leaves out every link, FIFO or device, logging the
# student and the file. It also keeps, as the submission time, the files' inode change
# time (set by the kernel only) instead of a timestamp.txt more than timestamp_tolerance
# seconds before or after it, noting both in timestamp_note.txt, and orders a student's
# folders by the same rule. A folder is collected for a student only when it and its
# files are owned by that student's unix user (or the instructor's); any other is left in
# the inbound, copied to refused/<assignment>/ and reported (README, "The exchange").
c.ExchangeFactory.collect = "grader_tests.exchange.ExchangeCollect"
# `nbgrader release_feedback` releases no page whose score or late penalty differs from
# the gradebook's (a page generated before a regrade, a grade withdrawn since) or that is
# of an earlier submission than the one in submitted/ (its timestamp.txt): the kit's
# release (grader_tests.exchange.ExchangeReleaseFeedback) names each such student and the
# `generate_feedback --force` that makes their page again, and releases the others.
c.ExchangeFactory.release_feedback = "grader_tests.exchange.ExchangeReleaseFeedback"
c.ExchangeCollect.timestamp_tolerance = 10.0

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
# The kit's collector (grader_tests.exchange.CanvasCollector, nbgrader's file-name
# collector plus the checks below) reads the pattern's optional groups `late`, `copy` and
# `attachment`: only the platform's own names count (a file unpacked from an archive a
# student handed in is skipped, as is a student id the kit's rule refuses,
# grader_tests/student_ids.py); of one student's several files of a notebook the newest is
# collected (highest attachment id, then upload time, then -N); a LATE_ file is stamped one second
# after the gradebook's due date (README, "From a learning platform").
# The kit's extractor (grader_tests.exchange.PlatformExtractor) unpacks the platform's
# archives but not the archives students handed in inside them (nbgrader's does: one
# student's .gz that is no tarball would stop the collection of the class).
c.ZipCollectApp.collector_plugin = "grader_tests.exchange.CanvasCollector"
c.ZipCollectApp.extractor_plugin = "grader_tests.exchange.PlatformExtractor"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9.\-]+)_(?P<late>LATE_)?[0-9]+_(?P<attachment>[0-9]+)_"
    r"(?P<file_id>attention|training)(?:-(?P<copy>[0-9]+))?\.ipynb$"
)

# Formulas render offline, wherever a page is opened (from disk on any machine, after
# `nbgrader fetch_feedback`, or served over HTTP): markdown cells are rendered by the kit's
# filter (grader_tests.feedback.markdown_to_html), which writes each formula as MathML
# (latex2mathml), drawn by the browser with no script. It replaces nbconvert's
# `markdown2html` in every HTMLExporter nbgrader makes: the feedback page's and
# formgrader's. The same filter cleans the HTML of every markdown cell a student could
# write (bleach: no script, no event handler, links to http, https and mailto only), so
# neither page runs a student's markup. nbgrader's feedback template also loads MathJax
# from a CDN: the kit's file of that template (grader_tests/templates/feedback/
# offline.html.j2) leaves it out, so the page fetches nothing. Set for generate_feedback's
# exporter only (a section `GenerateFeedback.HTMLExporter`, which traitlets gives
# precedence): formgrader keeps its own template.
c.HTMLExporter.filters = {"markdown2html": "grader_tests.feedback.markdown_to_html"}
c.GenerateFeedback.HTMLExporter.template_file = "offline.html.j2"
c.GenerateFeedback.HTMLExporter.extra_template_basedirs = [
    os.path.join(os.path.dirname(grader_tests.__file__), "templates"),  # the kit's file first
    # nbgrader's own feedback template (what nbgrader sets when nothing is configured)
    os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader",
                 "templates"),
]
