"""The names of the axes every envelope has."""

AXES = ("template", "decoding", "shots", "scoring")  # every envelope has these; more are declared by mechanism
