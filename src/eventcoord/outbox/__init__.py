"""The outbox: the committed log, handed on after every commit.

``relay`` publishes it to NATS JetStream under relay leadership (``leadership``) into a
stream bound to this store (``jetstream``); ``broker`` runs the embedded nats-server;
``follow`` streams it to Server-Sent Events subscribers; ``setup`` starts them together.
"""
