"""`python -m app.cli`, as the Procfile and the tests start a process from a checkout."""

import sys

from app.cli.main import main

sys.exit(main())
