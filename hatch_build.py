"""Build hook: the grammars and the rule files travel inside a built wheel as kbdebug/grammars and
kbdebug/knowledge; an editable install gets nothing of them.

A static `force-include` applies to editable wheels as well, and there it made a `site-packages/kbdebug/`
folder holding only `grammars/` and `knowledge/`: a second `kbdebug` beside the checkout that could shadow
it (`No module named 'kbdebug.cli.app'`). An editable install reads the data beside the package in the
checkout (kbdebug/_resources.py), so only the standard wheel needs them inside.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DATA = {"grammars": "kbdebug/grammars", "knowledge": "kbdebug/knowledge"}


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name == "wheel" and version == "standard":
            build_data["force_include"].update(DATA)
