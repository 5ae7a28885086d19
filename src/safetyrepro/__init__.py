"""SafetyRepro: how stable "model A beats model B" verdicts are across harness configurations."""

__version__ = "0.1.0"
