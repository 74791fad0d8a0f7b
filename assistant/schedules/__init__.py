"""Scheduled tasks: saved prompts that Celery beat runs on a schedule kept in the database."""
