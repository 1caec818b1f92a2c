"""`python -m kbdebug.parse`: write grammars/derived.json after editing a grammar or the code that reads them."""

import sys

from kbdebug.parse.packaged import main

sys.exit(main())
