"""The turn pipeline: ingest → assemble → call → commit."""
