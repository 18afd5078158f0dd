"""Coordination agents cannot forget: eventcoord speaks the hook protocol of coding-agent harnesses.

``payloads`` (what a hook receives) → ``hooks`` (what each event does) → ``answers`` (what
the harness reads). ``bindings`` ties a harness session to one eventcoord session;
``edits`` and ``patches`` find the files a tool call writes; ``reads`` is what the hooks
read; ``briefing``, ``news``, ``denial`` and ``lines`` are the text the model is told,
within ``budget``.
"""
