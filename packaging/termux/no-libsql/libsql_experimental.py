"""Stands in for the libSQL wheel where it does not exist (Termux on Android).

`.ci/run` puts this folder first on PYTHONPATH for its phone-path step, so `import
libsql_experimental` fails exactly as on a phone and tiermem really takes its stdlib `sqlite3`
fallback (`tiermem.core.db.available_driver`), with no environment variable forcing it.
"""

raise ImportError("libsql_experimental is blocked: simulating a platform without the libSQL wheel")
