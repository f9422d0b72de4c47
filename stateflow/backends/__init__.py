"""LLM back-ends: adapters behind the model profiles (``local`` = the embedded llama.cpp server)."""
