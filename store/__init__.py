"""The store: results schema, sessions, migrations, the job state machine and settings.

Web-free and science-free: the API, the CLI and the workers all import it; it imports only
``layerscope_core`` (and SQLAlchemy/Alembic/pydantic-settings).
"""
