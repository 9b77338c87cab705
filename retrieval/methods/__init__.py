"""The built-in methods: one module each, named after the method, with a
`factory(settings, *, replay)` (retrieval.evaluation.pipeline finds them by listing this package).
`base` holds the contract every method follows, built-in or the user's own."""
