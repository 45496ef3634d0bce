"""The user-owned Markdown workspace: which files are memory and how to reach them safely."""
