"""Summaries, tiers and the recall log arrive with the memory issues."""
