"""Test helpers: what test modules share (no test module imports another). On sys.path through pyproject's
`pythonpath`; see docs/development.md."""
