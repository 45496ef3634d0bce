"""Editor features on the core: hover insights, code lenses, hygiene diagnostics, memory edits, Git."""
