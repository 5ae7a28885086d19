"""Analyses: pure functions over the tidy tables (cells.parquet, items.parquet), one module per
family: verdict flips, variance attribution, item-subsample stability, surrogate attribution,
precision comparison."""
