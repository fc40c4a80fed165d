"""The feedback page nbgrader writes, finished by the kit: summary links named by part,
report lines wrapped (grader_tests/feedback.py). The page in a browser: test_browser.py."""

import re

from grader_tests.core import REPORT_WIDTH, CheckResult, FunctionResult, format_result
from grader_tests.feedback import MARK, finish_feedback_pages, finish_page

PAGE = ('<html><head><title>attention</title></head><body><div id="toc"><ol>'
        '<li><a href="#softmax_hidden_checks">Test cell</a> (Score: 10.0 / 10.0)</li>'
        '<li><a href="#exercise_weight_ratio_hidden_checks">Test cell</a> (Score: 0 / 2)</li>'
        '</ol></div><pre>a report</pre></body></html>')


def test_summary_links_are_named_by_part_and_the_style_is_added_once():
    page = finish_page(PAGE)
    assert '<a href="#softmax_hidden_checks"><code>softmax</code></a>' in page
    assert "<code>exercise_weight_ratio</code>" in page and "Test cell" not in page
    assert page.count(MARK) == 1 and page.index(MARK) < page.index("</head>")
    assert "pre-wrap" in page
    assert finish_page(page) == page


def test_the_hook_finishes_the_page_of_each_converted_notebook(tmp_path):
    notebook = tmp_path / "autograded" / "s1" / "attention" / "attention.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    page = tmp_path / "feedback" / "s1" / "attention" / "attention.html"
    page.parent.mkdir(parents=True)
    page.write_text(PAGE, encoding="utf-8")
    finish_feedback_pages("attention", "*", [str(notebook)])
    assert "<code>softmax</code>" in page.read_text(encoding="utf-8")


def test_report_lines_are_wrapped_without_losing_a_word():
    message = ("scaled_dot_product_attention with a causal (5, 5) mask: the weights differ "
               "from the definition (at index (1, 0, 0): got 0.0357797, expected 1). " * 3)
    result = FunctionResult("softmax", 0.0, 10.0,
                            [CheckResult("a check", False, "mask-after-softmax", message)], 0.0)
    text = format_result(result)
    body = [line for line in text.splitlines() if line.startswith("        ")]
    assert all(len(line) <= 8 + REPORT_WIDTH for line in body), body
    assert " ".join(line.strip() for line in body[:-1]).split() == message.split()
    assert body[-1].strip().startswith("Re-read trap 2")


def test_a_students_markdown_is_shown_as_text_where_it_holds_html():
    import nbformat

    from grader_tests.feedback import SanitizeStudentMarkdown

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("## Intro <b>given</b>",
                                              metadata={"nbgrader": {"locked": True}}),
                nbformat.v4.new_markdown_cell("**mine** <script>window.X=1</script>\n"
                                              "> a quote, [x](JavaScript:alert(1)), $a<b$")]
    out, _ = SanitizeStudentMarkdown().preprocess(nb, {})
    assert out.cells[0].source == "## Intro <b>given</b>"    # the release's own text
    mine = out.cells[1].source
    assert "<script" not in mine and "&lt;script&gt;" in mine and "**mine**" in mine
    assert "\n> a quote" in mine and "javascript:" not in mine.lower()


def render_markdown(source, locked=False):
    """``source`` as the kit's markdown filter renders it in a template, for a cell of the
    release (``locked``) or one a student could write."""
    import jinja2

    from grader_tests.feedback import markdown_to_html

    environment = jinja2.Environment(autoescape=False)
    environment.filters["markdown2html"] = markdown_to_html
    cell = {"cell_type": "markdown", "source": source,
            "metadata": {"nbgrader": {"locked": True, "grade_id": "intro"}} if locked else {}}
    return environment.from_string("{{ cell.source | markdown2html }}").render(cell=cell)


def test_formulas_become_mathml_and_unreadable_tex_stays_as_written():
    page = render_markdown("Scale by $\\frac{1}{\\sqrt{d_k}}$:\n\n"
                           "$$\\operatorname{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}$$\n\n"
                           "and $\\style{x}$.", locked=True)
    assert page.count("<math") == 2 and 'display="block"' in page and "<msqrt>" in page
    assert "$\\frac" not in page and "$$" not in page
    assert "$\\style{x}$" in page  # latex2mathml cannot read it: shown as written


def test_tex_carries_no_link_or_tag_into_the_mathml():
    from grader_tests.feedback import tex_to_mathml

    mathml = tex_to_mathml("\\href{javascript:alert(1)}{x} + \\text{<img src=x onerror=y>}")
    assert mathml is not None and mathml.startswith("<math")
    assert "javascript" not in mathml and "href" not in mathml
    assert "<img" not in mathml and "&lt;img" in mathml


def test_a_students_cell_keeps_its_markdown_and_loses_its_scripts():
    page = render_markdown("**mine** <img src=x onerror=y> <b>bold</b>\n\n"
                           "[a](javascript:x) [b](&#106;avascript:x) [c](<java\tscript:x>) "
                           "[d](data:text/html,x) [e](https://example.org/) $a<b$")
    assert "<strong>mine</strong>" in page and "<b>bold</b>" in page
    assert "onerror" not in page and '<img src="x">' in page  # an image, without its handler
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs == ["#harmful-link"] * 4 + ["https://example.org/"], hrefs
    assert "<math" in page
    own = render_markdown("<img src=figure.png> <b>given</b>", locked=True)
    assert '<img src="figure.png"' in own or "<img src=figure.png>" in own  # the release's own


def test_the_finished_page_opens_with_a_policy_that_fetches_nothing():
    from grader_tests.feedback import CSP

    page = finish_page(PAGE)
    head = page[page.index("<head>"):page.index("</head>")]
    assert head.startswith('<head>\n<meta http-equiv="Content-Security-Policy"'), head[:120]
    assert page.count("Content-Security-Policy") == 1
    assert "default-src 'none'" in CSP and "img-src data:;" in CSP
    assert "script-src" not in CSP  # no script at all: default-src 'none' covers it


def test_a_students_image_keeps_only_a_source_of_its_own():
    page = render_markdown("![a](https://t.example/p.png) ![b](https:t.example/p.png) "
                           '<img src="//t.example/p.png"> <img src="/\\t.example/p.png"> '
                           '<img src="&#104;ttps://t.example/p.png"> <img src=" ftp://t.example/p"> '
                           "![c](figure.png) ![d](data:image/png;base64,iVBORw0KGgo=)")
    sources = re.findall(r'src="([^"]*)"', page)
    assert sources == ["figure.png", "data:image/png;base64,iVBORw0KGgo="], (sources, page)
    assert page.count("<img") == 8 and 'alt="a"' in page  # the images stay, without a source
    # an entity-encoded data: link is a data: link (the browser decodes the attribute)
    assert "href" not in render_markdown('<a href="&#100;ata:text/html,x">d</a>')


def _render_feedback(cells):
    """The page generate_feedback's exporter (the kit's template, as nbgrader_config.py sets
    it, and nbgrader's own paths) renders for a notebook of ``cells``."""
    import os

    import nbformat
    import nbgrader
    from nbconvert.exporters import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader

    from tests.helpers import ROOT

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    feedback = config.GenerateFeedback.HTMLExporter
    css = os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader",
                       "static", "node_modules", "bootstrap", "dist", "css")
    exporter = HTMLExporter(template_name="feedback", template_file=feedback.template_file,
                            extra_template_basedirs=feedback.extra_template_basedirs,
                            extra_template_paths=[css], config=config)
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    page, _ = exporter.from_notebook_node(nb, resources={"nbgrader": {
        "notebook": "attention", "score": 7.2, "max_score": 10.0, "late_penalty": 0}})
    return page


def test_a_hidden_cells_score_is_not_shown_again_under_its_report_and_a_comment_names_its_part():
    import nbformat

    solution = nbformat.v4.new_code_cell("def softmax(scores, axis=-1):\n    return scores\n")
    solution.metadata.nbgrader = {"solution": True, "grade": False, "locked": False,
                                  "grade_id": "softmax_solution", "schema_version": 3,
                                  "comment": "Look at the axis."}
    hidden = nbformat.v4.new_code_cell("# Hidden checks of softmax", execution_count=3)
    hidden.metadata.nbgrader = {"solution": False, "grade": True, "locked": True, "points": 10,
                                "score": 7.2, "grade_id": "softmax_hidden_checks",
                                "schema_version": 3}
    hidden.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="softmax: 7.20 / 10 points\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "7.2"},
                               execution_count=3)]
    lesson = nbformat.v4.new_code_cell("1 + 1", execution_count=4)
    lesson.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "2"},
                                             execution_count=4)]
    page = _render_feedback([solution, hidden, lesson])
    assert "softmax: 7.20 / 10 points" in page
    assert "Out[3]" not in page  # the points nbgrader reads, not shown a second time
    assert "Out[4]" in page  # any other cell's result is shown as it is
    assert '<a href="#comment-softmax_solution">Comment</a>: <code>softmax</code>' in page
