"""Turning daemon answers into rich renderables for the terminal."""
