"""The kit's command lines: the demo (the main job), the CI script, and the thin commands
of the authoring package (``build_all``, ``i18n``, ``make_submissions``) and of the training
gate (``unlock_training.py``). The code they run lives in the installed packages
``authoring`` and ``grader_tests``."""
