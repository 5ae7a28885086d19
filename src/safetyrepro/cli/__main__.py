"""`python -m safetyrepro.cli`: the same command line as the `safetyrepro` script."""

from safetyrepro.cli import main

raise SystemExit(main())
