"""The read side: plain SQL over the read models, one module per concept.

Each function runs on a synchronous connection inside ``EventStore.query`` and returns
plain values for the routes to encode. Liveness is judged with :mod:`eventcoord.liveness`
against the database's clock (:func:`~eventcoord.api.queries.common.read_clock`).
"""
