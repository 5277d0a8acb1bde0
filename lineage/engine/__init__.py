"""KLineage's pure core: the expert corpus, partial evaluation of its flags, and the
walker that turns an expert into a verified lineage. No Django (runs on GPU hosts)."""
