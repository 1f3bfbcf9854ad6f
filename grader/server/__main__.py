"""``python -I -m grader.server SOCKET IDENTITY IDLE_SECONDS BACKEND READY_FD``: the grading server
(``daemon``), as ``grader.server.client`` starts it."""

import sys

from .daemon import main

sys.exit(main(sys.argv[1:]))
