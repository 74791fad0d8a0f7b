"""Form posts sent at the same instant by threads, each with its own database connection.

On PostgreSQL the tests call ``post_at_once`` in their own process (``transactional_db``). On SQLite
the test database lives in memory, shared by one process's connections, which is not how a server
runs: ``run_on_sqlite_file`` copies it to a file (WAL, a busy timeout: the server's settings) and runs
this module as a child process against it:

    python contend_forms.py --user demo --path /settings/budgets/categories/new --posts posts.json

It prints one JSON object: each post's status, in the order given.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def post_at_once(username: str, path: str, posts: list[dict[str, Any]]) -> list[int]:
    """Each post in its own thread and connection, signed in as ``username``, all released together."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    user = get_user_model().objects.get(username=username)
    barrier = threading.Barrier(len(posts))
    statuses: list[int] = [0] * len(posts)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            client = Client()
            client.force_login(user)
            barrier.wait(timeout=30)
            statuses[i] = client.post(path, posts[i]).status_code
        except BaseException as e:  # surfaced in the test, not lost in a thread
            errors.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(posts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return statuses


def run_on_sqlite_file(tmp_path: Path, username: str, path: str, posts: list[dict[str, Any]]) -> tuple[list[int], Path]:
    """``post_at_once`` in a child process, on a file copy of the (committed) SQLite test database.

    Returns each post's status and the file, whose rows the caller then reads (``rows_of``).
    """
    from django.db import connection

    db = tmp_path / "contend.sqlite3"
    connection.ensure_connection()
    target = sqlite3.connect(db)
    connection.connection.backup(target)
    target.execute("PRAGMA journal_mode=WAL")
    target.close()
    posts_file = tmp_path / "posts.json"
    posts_file.write_text(json.dumps(posts))
    env = {
        **os.environ,
        "SQLITE_PATH": str(db),
        "DATABASE_URL": "",
        "DJANGO_SETTINGS_MODULE": "assistant.settings",
    }
    done = subprocess.run(
        [sys.executable, __file__, "--user", username, "--path", path, "--posts", str(posts_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    statuses: list[int] = json.loads(done.stdout.strip().splitlines()[-1])["statuses"]
    return statuses, db


def rows_of(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--user", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--posts", required=True)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "assistant.settings")
    import django

    django.setup()
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.ALLOWED_HOSTS = ["testserver"]
    posts = json.loads(Path(args.posts).read_text())
    print(json.dumps({"statuses": post_at_once(args.user, args.path, posts)}))


if __name__ == "__main__":
    main()
