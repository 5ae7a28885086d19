"""Results: the tidy tables, figures, Markdown renderings, the headline, the GRID card and the run record."""
