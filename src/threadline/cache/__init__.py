"""Prefix reuse: how much of a request repeats the one before it."""
