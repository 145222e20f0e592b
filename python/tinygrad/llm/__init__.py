"""tinygrad.llm: language-model support; gguf.py reads GGUF weight files."""
