"""Consumers: a kind whose run reads batches from a source and moves the source's cursor in the
same transaction as the work each batch did (``app.consumer``).

- :mod:`.source`: the ``Source`` protocol a source satisfies, and the ``Page`` it returns;
- :mod:`.table`: ``TableSource``, a PostgreSQL table read by an increasing key;
- :mod:`.consumer`: the declaration (the run's kind and its supervisor schedule);
- :mod:`.run`: one run, batch after batch, each in one transaction with its cursor;
- :mod:`.supervise`: the supervisor's job, which keeps one run live per consumer.
"""
