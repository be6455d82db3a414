"""``python -m migrations_policy.cli``: the ``migrations-policy`` command."""

import sys

from migrations_policy.cli.shell import main

sys.exit(main())
