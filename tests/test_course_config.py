"""The parts of ``nbgrader_config.py`` that need no kernel: the late policy, the feedback
preprocessors' options, the feedback exporter's MathJax; quick (no nbgrader run)."""

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
    assert len(kit) == 2, kit  # the two of the kit: DropHiddenTestMarkers, SanitizeStudentMarkdown


def test_only_the_feedback_exporter_loads_mathjax_from_the_installed_copy(config):
    """``generate_feedback``'s exporter (section ``GenerateFeedback.HTMLExporter``) gets a
    file URL of an installed MathJax and the kit's template file; any other HTMLExporter
    (formgrader's) keeps nbconvert's defaults."""
    feedback = config.GenerateFeedback.HTMLExporter
    url = feedback.mathjax_url
    assert url.startswith("file://") and Path(url.split("?")[0][len("file://"):]).is_file()
    assert "config=TeX-" in url
    folders = [Path(d) for d in feedback.extra_template_basedirs]
    assert (folders[0] / "feedback" / feedback.template_file).is_file()
    assert (folders[1] / "feedback" / "index.html.j2").is_file()  # nbgrader's, extended
    plain = HTMLExporter(config=config)
    assert plain.template_file == "index.html.j2" and not plain.mathjax_url.startswith("file:")
