"""Test-suite wide fixtures."""
