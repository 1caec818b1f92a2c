"""The team crash service (`kbdebug serve`, extra `kbdebug[server]`): every job's diagnosis in one database,
grouped by root signature, served as JSON (/v1) and as pages for a browser.

It sits above the whole pipeline and nothing below imports it (import-linter's contracts in pyproject.toml):
FastAPI, SQLAlchemy and uvicorn are needed only here.
"""
