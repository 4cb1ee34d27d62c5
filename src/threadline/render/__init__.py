"""Renderers: the assembled Request → a provider's payload (dialect only; no transport)."""
