"""Durable workflows on ordinary job rows: steps, sleep, events, dependencies, the outbox.

- :mod:`.events`  ``app.publish_event``: stored in the publisher's transaction, expiring
- :mod:`.outbox`  ``app.outbox``: messages recorded in the caller's transaction, and their sinks
- :mod:`.relay`   delivering the outbox (the leader's ``outbox`` chore runs it)

Nothing here is imported by ``import forklift``: the app's methods import these modules when
first called, so an app that uses none of it loads none of it.
"""
