"""The cold child's side: what makes a process cold (``pristine``), running one test there and
writing its records (``runner``), and what it measures of its compiles (``stats``).

Nothing here imports the parent-side machinery of ``pytest_coldcompile.isolation``."""
