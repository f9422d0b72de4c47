"""Test doubles users may choose explicitly (never used as a fallback): a fake OpenAI server."""
