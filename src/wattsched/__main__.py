"""``python -m wattsched`` runs the command-line interface."""

from wattsched.cli import main

raise SystemExit(main())
