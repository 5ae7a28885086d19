"""What a backend may serve."""

# What a backend may serve: the operations that backend.generate and backend.loglikelihood name one for.
OPERATIONS = ("generate", "loglikelihood")
