"""The evaluated data: documents and questions (native and BEIR loaders, fingerprints), the BM25 analyzer."""
