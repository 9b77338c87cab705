"""The sitecustomize a replay's Python children start with (retrieval.recording.process_tree puts
this folder first on their PYTHONPATH); imported as part of the package, it does nothing."""
