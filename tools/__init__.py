"""Instructor tools of the kit: the notebook builder, the example class and the demo."""
