"""The report as data, rendered as Markdown or JSON."""
