"""The process boundary: the messages a parent and its workers exchange
(``messages.py``), the one codec both sides use (``codec.py``), and the page of memory a
worker shares with its parent (``progress.py``)."""
