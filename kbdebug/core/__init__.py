"""The ground floor: what every layer above may use and that uses nothing of kbdebug but itself: the facts'
declaration (facts), shapes, frames, phrases, values, time stamps, the spelling of an exception's name
(terminals), the templates' shared pieces (templating), the terminal (term), kbdebug's own error (errors)."""
