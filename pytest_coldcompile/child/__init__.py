"""The cold child's side: what makes a process cold (``pristine``, ``context``), how a forked
child runs its test (``forked``) and how a re-collecting one does (``recollected``), where its
output and records go (``capture``, ``sinks``, ``junit``), how it knows its item
(``fingerprint``), and what it measures of its compiles (``stats``).

Nothing here imports the parent-side machinery of ``pytest_coldcompile.isolation``."""
