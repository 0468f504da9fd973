"""Recall: pick the memories a reply reads.

`ranking` is the pure part (no Django: what is in the pool, what qualifies, what is kept, and why
not); `recaller` is the shell that reads summaries and vectors and reranks.
"""
