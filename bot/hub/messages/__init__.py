"""What the hub says: sink documents, digests, sink health, subscription answers."""
