"""The feedback pages nbgrader writes, finished for the kit (``finish_feedback_pages``,
nbgrader's ``post_convert_hook`` of ``generate_feedback`` in ``nbgrader_config.py``).

nbgrader's feedback template lists every graded cell as an anonymous "Test cell" link and
shows cell outputs in ``<pre>`` blocks that do not wrap. Each page is edited once, after
nbgrader wrote it: the summary's links are named by the graded part (the grade id without
``_hidden_checks``), and a style sheet makes output lines wrap inside the page.
"""

from __future__ import annotations

import glob
import html
import os
import re

from nbconvert.filters import clean_html
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import List

MARK = "attention-kit-feedback"  # a page carrying it was finished already
STYLE = (f'<style type="text/css" id="{MARK}">\n'
         "div.output_area pre, div.output_subarea pre, div.output_text pre,\n"
         "div.input_area pre {\n"
         "  white-space: pre-wrap; overflow-wrap: anywhere;\n}\n"
         "div.output_subarea { max-width: 100%; }\n"
         "</style>\n")
_TEST_CELL = re.compile(r'<a href="#([A-Za-z0-9_-]+)">Test cell</a>')


def part_name(grade_id: str) -> str:
    """The graded part a grade cell belongs to: ``softmax_hidden_checks`` -> ``softmax``."""
    return grade_id[: -len("_hidden_checks")] if grade_id.endswith("_hidden_checks") \
        else grade_id


def finish_page(text: str) -> str:
    """One feedback page's HTML, finished (the same text if it was finished already).

    Args:
        text: the page nbgrader wrote.

    Returns:
        The page with named summary links and the wrapping style sheet.
    """
    if MARK in text:
        return text
    text = _TEST_CELL.sub(lambda m: f'<a href="#{m.group(1)}"><code>'
                                    f'{html.escape(part_name(m.group(1)))}</code></a>', text)
    at = text.find("</head>")
    return text[:at] + STYLE + text[at:] if at >= 0 else STYLE + text


def finish_feedback_pages(assignment: str | None = None, student: str | None = None,
                          notebooks: list[str] | None = None, **_: object) -> None:
    """nbgrader's ``post_convert_hook`` for ``generate_feedback``: finish the pages of the
    submission just converted.

    nbgrader passes the autograded notebooks (``autograded/<student>/<assignment>/*.ipynb``)
    it converted; their pages are ``feedback/<student>/<assignment>/<name>.html`` beside
    ``autograded/`` in the course folder.

    Args:
        assignment, student: nbgrader's patterns (unused: the paths say which).
        notebooks: the converted notebooks' paths.
    """
    for notebook in notebooks or ():
        folder = os.path.dirname(os.path.abspath(notebook))
        assignment_id = os.path.basename(folder)
        student_id = os.path.basename(os.path.dirname(folder))
        course = os.path.dirname(os.path.dirname(os.path.dirname(folder)))
        name = os.path.splitext(os.path.basename(notebook))[0]
        for page in glob.glob(os.path.join(glob.escape(course), "feedback",
                                           glob.escape(student_id), glob.escape(assignment_id),
                                           glob.escape(name) + ".html")):
            with open(page, encoding="utf-8") as f:
                text = f.read()
            finished = finish_page(text)
            if finished != text:
                with open(page + ".partial", "w", encoding="utf-8") as f:
                    f.write(finished)
                os.replace(page + ".partial", page)


class FeedbackPreprocessor(NbGraderPreprocessor):
    """Base of the kit's ``generate_feedback`` preprocessors.

    nbconvert's ``HTMLExporter`` configures ``display_data_priority`` for every
    preprocessor it runs; nbgrader's base class declares that trait without making it
    configurable, so traitlets warns "Config option `display_data_priority` not
    recognized" for each preprocessor built on it. Declared configurable here, as
    nbgrader's own ``GetGrades`` does (same default).
    """

    display_data_priority = List(['text/html', 'application/pdf', 'text/latex', 'image/svg+xml',
                                  'image/png', 'image/jpeg', 'text/plain']).tag(config=True)


class SanitizeStudentMarkdown(FeedbackPreprocessor):
    """Feedback only: the markdown a student wrote is shown as text where it holds HTML.

    nbgrader's feedback template renders markdown cells without nbconvert's sanitiser, so a
    ``<script>`` in a student's markdown cell would run in the page the student and the
    instructor open. Every markdown cell that is not the release's own (locked) text has
    its HTML escaped (``nbconvert.filters.clean_html``) and ``javascript:`` links disarmed;
    markdown itself (emphasis, lists, quotes, math) still renders. Outputs are sanitised
    by ``c.HTMLExporter.sanitize_html``.
    """

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {})
        if cell.cell_type == "markdown" and not (meta.get("nbgrader") or {}).get("locked") \
                and not meta.get("grading_note"):
            text = clean_html(cell.source)
            text = re.sub(r"(?m)^(\s*)&gt;", r"\1>", text)  # quotes stay quotes
            cell.source = re.sub(r"(?i)javascript\s*:", "blocked:", text)
        return cell, resources
