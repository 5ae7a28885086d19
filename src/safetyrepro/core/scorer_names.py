"""The names of the scorers every benchmark can have, and the label of a reply that gives none."""

UNPARSED = "unparsed"  # the label of a reply that gives none of the item's labels
RULES = "rules"  # every benchmark's own free-form scorer: its `extract`
JUDGE = "judge"  # a judge model asked a question about each reply (safetyrepro.running.judge)
