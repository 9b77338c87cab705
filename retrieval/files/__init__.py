"""Files written all or nothing: one file, or a folder as one set."""
