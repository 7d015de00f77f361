"""What the hub owes sinks (deliveries, their health) and who subscribed to what."""
