"""The Corpus stores nothing of its own: it searches memory's index."""
