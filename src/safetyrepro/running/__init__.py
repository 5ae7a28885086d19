"""Running cells: prompts, the cell runner, model servers, model files and benchmark data."""
