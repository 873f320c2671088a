"""Consumers: a kind whose run reads batches from a source and moves the source's cursor in the
same transaction as the work each batch did (``app.consumer``).

- :mod:`.source`: the ``Source`` protocol a source satisfies, and the ``Page`` it returns;
- :mod:`.table`: ``TableSource``, a PostgreSQL table read by an increasing key;
- :mod:`.consumer`: a declared consumer, and how a run is started;
- :mod:`.declare`: ``app.consumer``: the run's kind, and the supervisor's kind and schedule;
- :mod:`.run`: one run, batch after batch, each in one transaction with its cursor;
"""
