"""The jobs layer. Importing it makes the file tasks of the configured model store
(``<LAYERSCOPE_STORE_DIR>/tasks``, read when asked) known to ``science.tasks.get_task``."""

from science.tasks import use_task_store


def settings_task_store():
    """``<store>/tasks`` of the current settings."""
    from store.settings import get_settings

    return get_settings().resolved_store_dir / "tasks"


use_task_store(settings_task_store)
