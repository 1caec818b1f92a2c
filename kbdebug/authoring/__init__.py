"""Tools for people who write rules: lint a rule directory, show a rule, run its examples.

They sit on top of the pipeline (they diagnose examples and render guides), beside the CLI.
"""
