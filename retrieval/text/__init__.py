"""Text shown to people: Markdown and HTML escaping of user text, and credentials cut out of it."""
