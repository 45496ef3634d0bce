"""The security audit: checks of a workspace and every front's settings, each with severity and fix."""
