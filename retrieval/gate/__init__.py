"""The regression gate: baseline schema, comparison and update, snapshots, verdicts, the pytest plugin."""
