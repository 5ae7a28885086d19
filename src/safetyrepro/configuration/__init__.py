"""The run configuration: loading and checking settings, the envelope, the plan, what a job depends on."""
