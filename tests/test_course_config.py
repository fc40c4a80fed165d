"""The parts of ``nbgrader_config.py`` that need no kernel: the late policy, the feedback
preprocessors' options, the markdown filter and feedback template; quick (no nbgrader run)."""

import logging
from pathlib import Path

import pytest
from nbconvert.exporters import HTMLExporter
from traitlets.config.loader import PyFileConfigLoader
from tests.helpers import ROOT

HOUR = 3600.0


@pytest.fixture(scope="module")
def config():
    return PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()


@pytest.mark.parametrize("seconds_late, fraction", [
    (1.0, 0.1), (3 * HOUR, 0.1), (24 * HOUR, 0.1), (24 * HOUR + 1, 0.2), (30 * HOUR, 0.2),
    (9 * 24 * HOUR + 1, 1.0), (10 * 24 * HOUR, 1.0), (40 * 24 * HOUR, 1.0),
])
def test_a_late_notebook_loses_a_tenth_of_its_score_per_day_or_part_of_a_day(
        config, seconds_late, fraction):
    plugin = config.AssignLatePenalties.plugin_class(config=config)
    assert plugin.late_submission_penalty("s", 98.0, seconds_late) == pytest.approx(98.0 * fraction)


def test_a_notebook_on_time_has_no_penalty(config):
    plugin = config.AssignLatePenalties.plugin_class(config=config)
    assert plugin.late_submission_penalty("s", 98.0, 0.0) is None


def test_the_feedback_preprocessors_take_the_exporters_options_without_a_warning(config, caplog):
    """nbconvert's HTMLExporter configures ``display_data_priority`` for every preprocessor;
    none of the kit's warns that it does not know it."""
    exporter = HTMLExporter(config=config)
    with caplog.at_level(logging.WARNING):
        for preprocessor in config.GenerateFeedback.preprocessors:
            exporter.register_preprocessor(preprocessor, enabled=True)
    assert "not recognized" not in caplog.text, caplog.text
    kit = [p for p in config.GenerateFeedback.preprocessors
           if not p.__module__.startswith(("nbgrader", "nbconvert"))]
    # the kit's three: DropHiddenTestMarkers, SanitizeStudentMarkdown, FeedbackLabels
    assert [p.__name__ for p in kit] == ["DropHiddenTestMarkers", "SanitizeStudentMarkdown",
                                         "FeedbackLabels"], kit


def test_markdown_is_rendered_by_the_kits_filter_and_the_feedback_loads_no_mathjax(config):
    """Every HTMLExporter nbgrader makes (the feedback page's, formgrader's) renders
    markdown with the kit's filter (formulas as MathML, a student's HTML cleaned);
    ``generate_feedback``'s exporter (section ``GenerateFeedback.HTMLExporter``) uses the
    kit's template file, which leaves nbgrader's MathJax out; any other keeps its own."""
    from grader_tests.feedback import markdown_to_html

    plain = HTMLExporter(config=config)
    filters = dict(plain.default_filters())
    filters.update(plain.filters)
    assert filters["markdown2html"] == "grader_tests.feedback.markdown_to_html"
    environment = plain.environment
    assert environment.filters["markdown2html"] is markdown_to_html
    feedback = config.GenerateFeedback.HTMLExporter
    folders = [Path(d) for d in feedback.extra_template_basedirs]
    template = folders[0] / "feedback" / feedback.template_file
    assert template.is_file() and 'replace(mathjax(), "")' in template.read_text()
    assert (folders[1] / "feedback" / "index.html.j2").is_file()  # nbgrader's, extended
    assert plain.template_file == "index.html.j2"
    assert "mathjax_url" not in feedback and "mathjax_url" not in config.HTMLExporter


@pytest.mark.parametrize("made", [False, True], ids=["missing", "empty"])
def test_the_demo_on_a_folder_that_is_not_a_course_says_what_it_needs(tmp_path, made):
    """``python -m tools.demo --root DIR`` on a missing folder or one without its own
    nbgrader_config.py: a message naming the folder and the example class's configuration
    as the model, exit status 2, no traceback, nothing written there."""
    import subprocess
    import sys

    root = tmp_path / "not-a-course"
    if made:
        root.mkdir()
    result = subprocess.run([sys.executable, "-m", "tools.demo", "--root", str(root)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    what = "is not a course: it has no nbgrader_config.py." if made else "is not a folder."
    assert result.stderr == (
        f"demo: {root} {what} A course folder needs its own nbgrader_config.py: the example "
        "class's example/nbgrader_config.py loads the kit's configuration with "
        "load_subconfig(...) and sets its own CourseDirectory.root, course_id and db_url.\n")
    assert (sorted(p.name for p in root.iterdir()) == []) if made else not root.exists()
