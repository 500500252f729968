"""Training the embedded model: the corpus, FIM samples, the resumable loop."""
