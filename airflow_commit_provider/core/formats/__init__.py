"""Persistent commit formats, compatible with Hadoop's JSON (readers ignore unknown fields)."""
