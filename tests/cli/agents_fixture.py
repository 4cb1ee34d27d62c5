"""Agents for the CLI's tests to name in THREADLINE_AGENTS."""

from __future__ import annotations

from threadline.turn.delegate import Agent

AGENTS = [Agent("researcher", "Finds facts.", "You are a researcher.")]
NOT_AGENTS = ["researcher"]


def agents() -> list[Agent]:
    return AGENTS
