"""The app's own widgets, one per file."""
