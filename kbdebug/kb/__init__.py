"""The rule knowledge base: rule files in `knowledge/` (and user directories) mapped onto records."""

from kbdebug.kb.loader import KnowledgeBase, RuleFileError, load_kb
from kbdebug.kb.model import Rule

__all__ = ["KnowledgeBase", "Rule", "RuleFileError", "load_kb"]
