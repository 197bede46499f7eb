"""Collectors of real GUI screenshots with element boxes (web pages via headless Chromium)."""
