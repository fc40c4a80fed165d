"""The feedback page nbgrader writes, finished by the kit: summary links named by part,
report lines wrapped (grader_tests/feedback.py). The page in a browser: test_browser.py."""

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
