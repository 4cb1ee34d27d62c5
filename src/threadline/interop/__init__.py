"""Moving conversations in and out of threadline."""
