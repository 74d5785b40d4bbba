"""Search spaces with direct IR builders (fast estimation) and torch builders (training)."""
