"""Recipes reef ships: each is selectable by name (`--recipe record`) or dotted reference."""
