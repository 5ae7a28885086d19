"""The workflow's glue: what the Snakefile and its rules call. The plan of a run and its preflight, the
fingerprints that make a job rerun, the rules' inputs, priorities and record checks, the commands the jobs
run, and the run's lifecycle around them (its lock, SIGTERM, the failure report)."""
