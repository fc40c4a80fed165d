"""The feedback pages nbgrader writes, finished for the kit (``finish_feedback_pages``,
nbgrader's ``post_convert_hook`` of ``generate_feedback`` in ``nbgrader_config.py``).

nbgrader's feedback template lists every graded cell as an anonymous "Test cell" link and
shows cell outputs in ``<pre>`` blocks that do not wrap. Each page is edited once, after
nbgrader wrote it: the summary's links are named by the graded part (the grade id without
``_hidden_checks``), and a style sheet makes output lines wrap inside the page.

Markdown cells are rendered by ``markdown_to_html`` (nbconvert's ``markdown2html`` filter,
replaced in ``nbgrader_config.py`` for the feedback page and the formgrader alike): the TeX
between ``$`` delimiters becomes MathML, which the browser draws with no script, so
formulas render offline wherever the page is opened, and the HTML of every cell a student
could write is cleaned by bleach (no script, no event handler, links to http, https and
mailto only).
"""

from __future__ import annotations

import glob
import html
import os
import re

import bleach
from jinja2 import pass_context
from jinja2.runtime import Context
from latex2mathml.converter import convert as latex_to_mathml
from nbconvert.filters import clean_html
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import List

from .i18n import N_, _, config_language, use_language

MARK = "attention-kit-feedback"  # the id of the style sheet finish_page adds
STYLE = (f'<style type="text/css" id="{MARK}">\n'
         "div.output_area pre, div.output_subarea pre, div.output_text pre,\n"
         "div.input_area pre {\n"
         "  white-space: pre-wrap; overflow-wrap: anywhere;\n}\n"
         "div.output_subarea { max-width: 100%; }\n"
         "</style>\n")
# The feedback page fetches nothing, whatever a cell holds: no script, no frame, no
# connection; styles and images only from the page itself (inline) or data: URLs.
CSP = ("default-src 'none'; style-src 'unsafe-inline' data:; img-src data:; font-src data:; "
       "base-uri 'none'; form-action 'none'")
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
_HEAD = re.compile(r"<head\b[^>]*>", re.I)
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
        The page with named summary links, the wrapping style sheet and, first in its
        head, the Content-Security-Policy ``CSP`` (the page loads nothing from elsewhere).
        A page is finished already when its head opens with that policy.
    """
    head = _HEAD.search(text)
    if head and text[head.end():].startswith("\n" + CSP_META):
        # finished already: the policy opens the head, where nothing of a student's is (a
        # mere MARK could be a student's words, which the page shows in its body)
        return text
    text = _TEST_CELL.sub(lambda m: f'<a href="#{m.group(1)}"><code>'
                                    f'{html.escape(part_name(m.group(1)))}</code></a>', text)
    head = _HEAD.search(text)  # the same place: the summary's links come after the head
    text = text[:head.end()] + "\n" + CSP_META + text[head.end():] if head else CSP_META + text
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


# --- Markdown cells: formulas as MathML, a student's HTML cleaned ---------------------------

# The MathML elements and attributes latex2mathml writes for the TeX of the notebooks
# (MathML Core and the few presentation attributes Chromium and Firefox draw); anything
# else it writes (``\href``'s link, raw text of ``\text{...}`` that reads as a tag) is
# dropped or escaped by bleach.
MATHML_TAGS = frozenset({
    "math", "mrow", "mi", "mo", "mn", "ms", "mtext", "mspace", "msub", "msup", "msubsup",
    "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd",
    "mstyle", "mpadded", "mphantom", "menclose", "merror", "semantics", "annotation",
})
MATHML_ATTRIBUTES = ["display", "displaystyle", "scriptlevel", "mathvariant", "mathsize",
                     "mathcolor", "mathbackground", "stretchy", "fence", "separator",
                     "symmetric", "largeop", "movablelimits", "accent", "accentunder",
                     "lspace", "rspace", "minsize", "maxsize", "width", "height", "depth",
                     "linethickness", "columnalign", "rowalign", "columnspacing",
                     "rowspacing", "columnlines", "rowlines", "frame", "notation",
                     "linebreak", "encoding"]
# The HTML a student's markdown cell may render to: what markdown writes (paragraphs,
# emphasis, lists, quotes, code, headings with their anchor links, tables, links, images)
# and MathML. Everything else is shown as text.
STUDENT_TAGS = frozenset({
    "p", "br", "hr", "em", "strong", "b", "i", "del", "s", "code", "pre", "span", "div",
    "blockquote", "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a", "img", "abbr",
    "acronym", "table", "thead", "tbody", "tr", "th", "td",
}) | MATHML_TAGS
# Links of a student's cell; an image may be one of the cell's attachments (a data: URL,
# for images only: ``_student_attribute``).
STUDENT_PROTOCOLS = frozenset({"http", "https", "mailto", "data"})


def _local_source(value: str) -> bool:
    """Whether an image source of a student's cell loads nothing from the network: a
    ``data:`` URL (an attachment) or a relative path (a file beside the page). A URL with
    any other scheme (``https:``, ``ftp:``, ``https:host`` without slashes) or a
    protocol-relative one (``//host``, and ``/\\host``, which browsers read alike) is not."""
    bare = re.sub(r"[\x00-\x20\x7f]", "", html.unescape(value)).lower()  # as browsers read it
    if bare.startswith("data:"):
        return True
    return not re.match(r"[a-z][a-z0-9+.\-]*:|[/\\]{2}", bare)


def _student_attribute(tag: str, name: str, value: str) -> bool:
    """bleach's attribute filter of a student's cell: whether ``tag`` keeps ``name=value``."""
    if name in ("class", "id", "align", "title") or \
            (tag in MATHML_TAGS and name in MATHML_ATTRIBUTES):
        return True
    if tag == "img":  # a source the page loads: the cell's own (data:) or a relative path
        return name == "alt" or (name == "src" and _local_source(value))
    if tag == "a" and name == "href":  # data: only as an image's source
        return not re.sub(r"[\x00-\x20]", "", html.unescape(value)).lower().startswith("data:")
    return False


def tex_to_mathml(tex: str, display: str = "inline") -> str | None:
    """The MathML of one formula, cleaned to ``MATHML_TAGS`` and ``MATHML_ATTRIBUTES``.

    Args:
        tex: the TeX between the delimiters (``\\frac{QK^\\top}{\\sqrt{d_k}}``), as written.
        display: ``"inline"`` (``$...$``) or ``"block"`` (``$$...$$``, an environment).

    Returns:
        One ``<math>`` element as HTML text, or None where latex2mathml cannot read the TeX
        (the caller shows it as written).
    """
    try:
        mathml = latex_to_mathml(tex, display=display)
    except Exception:  # latex2mathml raises many kinds on TeX it does not read
        return None
    return bleach.clean(mathml, tags=MATHML_TAGS, attributes={"*": MATHML_ATTRIBUTES},
                        protocols=[], strip=False)


class MathMLRenderer(IPythonRenderer):
    """nbconvert's markdown renderer with each formula written as MathML (``tex_to_mathml``)
    instead of TeX for MathJax to find; a formula latex2mathml cannot read stays as
    written. Harmful link protocols (``javascript:``, ``vbscript:``, ``file:``, ``data:``
    other than images) are refused by mistune."""

    def block_math(self, body: str) -> str:
        """``$$...$$``."""
        return tex_to_mathml(body, "block") or super().block_math(body)

    def latex_environment(self, name: str, body: str) -> str:
        """``\\begin{name}...\\end{name}`` outside delimiters."""
        return tex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", "block") \
            or super().latex_environment(name, body)

    def inline_math(self, body: str) -> str:
        """``$...$``."""
        return tex_to_mathml(body, "inline") or super().inline_math(body)


def clean_student_html(text: str) -> str:
    """A student's rendered markdown with every tag, attribute and link protocol outside
    ``STUDENT_TAGS``, ``_student_attribute`` and ``STUDENT_PROTOCOLS`` escaped or dropped
    (bleach, which also reads entity-encoded and whitespace-split protocols)."""
    return bleach.clean(text, tags=STUDENT_TAGS, attributes=_student_attribute,
                        protocols=STUDENT_PROTOCOLS, strip=False)


@pass_context
def markdown_to_html(context: Context, source: str) -> str:
    """nbconvert's ``markdown2html`` template filter for the feedback page and formgrader:
    markdown rendered as nbconvert does, with formulas as MathML (``MathMLRenderer``); a
    cell that is not the release's own (nbgrader's ``locked``, whose source nbgrader's
    autograde restored) is then cleaned by ``clean_student_html``.

    Args:
        context: the Jinja context (its ``cell``: attachments and metadata).
        source: the cell's markdown.

    Returns:
        The cell's HTML.
    """
    cell = context.get("cell") or {}
    attachments = cell.get("attachments") if isinstance(cell, dict) else None
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    grading = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    release_text = isinstance(grading, dict) and grading.get("locked") is True
    renderer = MathMLRenderer(escape=False, allow_harmful_protocols=False,
                              attachments=attachments if isinstance(attachments, dict) else {})
    text = MarkdownWithMath(renderer=renderer).render(source)
    return text if release_text else clean_student_html(text)


# What an output's metadata may keep: the size of a displayed image (pixels), nothing else.
IMAGE_TYPES = ("image/png", "image/jpeg")
MAX_IMAGE_SIDE = 10_000  # pixels: a sane bound on a width or height the page is given
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
ATTACHMENT_TYPES = ("image/png", "image/jpeg", "image/gif")


def image_side(value: object) -> int | float | None:
    """``value`` as an image width or height the page may use, else None.

    Args:
        value: a ``width`` or ``height`` from an output's metadata (any JSON value).

    Returns:
        A positive int or float of at most ``MAX_IMAGE_SIDE`` (pixels), or None (dropped):
        strings, booleans, NaN, zero, negatives and larger numbers are all dropped.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if 0 < value <= MAX_IMAGE_SIDE else None


def clean_output_metadata(metadata: object) -> dict:
    """An output's metadata reduced to what the kit shows: each image type's ``width`` and
    ``height`` (``image_side``), at the top level and per type; everything else dropped.

    nbconvert's HTML templates write these values into ``<img>`` tags without quotes and
    read the per-type entries as dicts, so a string there would add attributes (script) to
    the page, and a per-type entry that is not a dict would stop the page being written.

    Args:
        metadata: the output's ``metadata`` (any JSON value).

    Returns:
        A new dict, e.g. ``{"image/png": {"width": 320}}``, possibly empty.
    """
    if not isinstance(metadata, dict):
        return {}
    kept: dict = {}
    for key in ("width", "height"):
        side = image_side(metadata.get(key))
        if side is not None:
            kept[key] = side
    for mime in IMAGE_TYPES:
        entry = metadata.get(mime)
        if isinstance(entry, dict):
            sizes = {k: image_side(entry.get(k)) for k in ("width", "height")}
            sizes = {k: v for k, v in sizes.items() if v is not None}
            if sizes:
                kept[mime] = sizes
    return kept


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _clean_output(output: dict) -> dict | None:
    """One output with every field the page shows in a form it can show; None to drop."""
    kind = output.get("output_type")
    if kind not in OUTPUT_TYPES:
        return None
    if kind == "stream":
        name = output.get("name")
        text = output.get("text", "")
        text = "".join(map(str, text)) if isinstance(text, list) else str(text)
        return {"output_type": "stream", "name": name if name in ("stdout", "stderr")
                else "stdout", "text": text}
    if kind == "error":
        trace = output.get("traceback")
        return {"output_type": "error", "ename": str(output.get("ename", "")),
                "evalue": str(output.get("evalue", "")),
                "traceback": [str(t) for t in trace] if isinstance(trace, list) else []}
    data = output.get("data")
    data = {str(k): v for k, v in data.items()} if isinstance(data, dict) else {}
    for mime, value in list(data.items()):
        if mime.startswith("text/") or mime.startswith("image/"):
            if isinstance(value, list):
                data[mime] = "".join(map(str, value))
            elif not isinstance(value, str):
                del data[mime]  # a text or an image is a string
    cleaned = {"output_type": kind, "data": data,
               "metadata": clean_output_metadata(output.get("metadata"))}
    if kind == "execute_result":
        cleaned["execution_count"] = _count(output.get("execution_count"))
    return cleaned


def _clean_attachments(cell: dict) -> None:
    """Keep a markdown cell's attachments that are images given as strings; every
    ``attachment:`` link to anything else is disarmed (nbconvert stops the whole page on a
    link to a missing attachment)."""
    attachments = cell.get("attachments")
    kept = {}
    if isinstance(attachments, dict):
        for name, bundle in attachments.items():
            if isinstance(bundle, dict):
                images = {m: v for m, v in bundle.items()
                          if m in ATTACHMENT_TYPES and isinstance(v, str)}
                if images and re.fullmatch(r"[A-Za-z0-9._-]+", str(name)):
                    kept[str(name)] = images
    if "attachments" in cell:
        if kept:
            cell["attachments"] = kept
        else:
            del cell["attachments"]
    names = "|".join(re.escape(n) for n in sorted(kept, key=len, reverse=True))
    known = rf"(?:{names})(?=[\s)>\"']|$)" if names else r"(?!)"
    if isinstance(cell.get("source"), str):
        cell["source"] = re.sub(rf"attachment\\?:(?!{known})", "attachment-not-shown:",
                                cell["source"])


def clean_cell_metadata(cell: dict) -> None:
    """A cell's metadata reduced to what nbgrader and the kit use, in the form they use:
    ``nbgrader`` (a dict: nbgrader's autograde checked it against the assignment),
    ``tags`` (strings) and the kit's ``grading_note`` (True).
    The rest (``transient``, ``raw_mimetype``, ``alt``, ...) is dropped: nbconvert's
    templates read it unchecked."""
    meta = cell.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    kept: dict = {}
    grading = meta.get("nbgrader")
    if isinstance(grading, dict):
        kept["nbgrader"] = grading
    tags = meta.get("tags")
    if isinstance(tags, list):
        kept["tags"] = [t for t in tags if isinstance(t, str) and
                        re.fullmatch(r"[A-Za-z0-9_-]+", t)]
    if meta.get("grading_note") is True:
        kept["grading_note"] = True
    cell["metadata"] = kept


def clean_notebook(nb: dict) -> dict:
    """Make every piece of student data that nbconvert's HTML templates put into tag
    attributes, or read as a given type, safe to render; in place, and returned.

    Used on the autograded notebook (``JailedExecute``, so the formgrader is safe too) and
    again on the feedback (``SanitizeStudentMarkdown``). Per cell: the metadata
    (``clean_cell_metadata``), a code cell's ``execution_count`` (an int or None), its
    outputs (known kinds only; stream names ``stdout``/``stderr``; text and images as
    strings; metadata by ``clean_output_metadata``), a markdown or raw cell's attachments
    (images only). The notebook's ``widgets`` metadata (script state) is dropped.

    Args:
        nb: a notebook (``nbformat.NotebookNode`` or plain dict), version 4.

    Returns:
        ``nb``, cleaned.
    """
    import nbformat

    metadata = nb.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("widgets", None)
    for cell in nb.get("cells", []):
        clean_cell_metadata(cell)
        if cell.get("cell_type") == "code":
            cell["execution_count"] = _count(cell.get("execution_count"))
            outputs = cell.get("outputs")
            cleaned = [_clean_output(o) for o in outputs if isinstance(o, dict)] \
                if isinstance(outputs, list) else []
            cell["outputs"] = [nbformat.from_dict(o) for o in cleaned if o is not None]
        else:
            _clean_attachments(cell)
    return nb


def _is_kit_note(cell: dict, index: int) -> bool:
    """The note ``NoteChosenNotebook`` opens an autograded notebook with: first, marked
    ``grading_note`` (stripped from every student cell before the kit adds its own), and
    HTML-escaped text only (no tag can be in it)."""
    from .notebook_choice import NOTE_MARK

    source = cell.get("source", "")
    return index == 0 and cell.get("metadata", {}).get("grading_note") is True and \
        isinstance(source, str) and source.startswith(NOTE_MARK) and \
        "<" not in source and ">" not in source


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


# The words of nbgrader's feedback template, marked for the catalogue; the kit's template
# (templates/feedback/offline.html.j2) shows each in the course's language. "No response."
# is the comment nbgrader's autograde gives a solution left as released.
TEMPLATE_LABELS = (N_("Score"), N_("Top"), N_("Coding free-response"), N_("Written response"),
                   N_("Task"), N_("Comment"), N_("Comments:"), N_("Late submission penalty"),
                   N_("Student's answer"), N_("Student's task"), N_("Grade cell:"),
                   N_("No response."))


class FeedbackLabels(FeedbackPreprocessor):
    """Feedback only: the labels of the page (``TEMPLATE_LABELS``) in the course's language
    (``c.AttentionKit.language``), as ``resources["attention_kit_labels"]``, the English
    label -> its text, which the kit's feedback template shows in place of nbgrader's
    English words.

    Raises:
        ValueError: for a course language that is not one of the kit's.
    """

    def preprocess(self, nb, resources):
        with use_language(config_language(self.config)):
            resources["attention_kit_labels"] = {label: _(label) for label in TEMPLATE_LABELS}
        return nb, resources


class SanitizeStudentMarkdown(FeedbackPreprocessor):
    """Feedback only: the markdown a student wrote is shown as text where it holds HTML,
    and every other piece of student data the page's template uses is cleaned
    (``clean_notebook``).

    nbgrader's feedback template renders markdown cells without nbconvert's sanitiser, so a
    ``<script>`` in a student's markdown cell would run in the page the student and the
    instructor open. Every markdown cell that is not the release's own (locked) or the
    kit's note (``_is_kit_note``) has its HTML
    escaped (``nbconvert.filters.clean_html``) and ``javascript:`` links disarmed;
    markdown itself (emphasis, lists, quotes, math) still renders. Outputs are sanitised
    by ``c.HTMLExporter.sanitize_html``; their metadata here. The rendered HTML of such a
    cell is cleaned once more by ``markdown_to_html`` (in formgrader too, which this
    preprocessor does not reach).
    """

    def preprocess(self, nb, resources):
        clean_notebook(nb)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {})
        # The release's own text: nbgrader's autograde restored a locked cell's source and
        # refuses a notebook with a locked cell whose grade id the assignment lacks.
        release_text = bool((meta.get("nbgrader") or {}).get("locked"))
        if cell.cell_type != "markdown" or release_text:
            return cell, resources
        text = cell.source
        if not _is_kit_note(cell, index):  # the note is escaped text already
            text = clean_html(text)
            text = re.sub(r"(?m)^(\s*)&gt;", r"\1>", text)  # quotes stay quotes
        # links too: the note names the student's files, which may read as a link
        cell.source = re.sub(r"(?i)javascript\s*:", "blocked:", text)
        return cell, resources
