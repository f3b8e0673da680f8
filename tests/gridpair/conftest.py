import os

# The interpreted-kernel tests need TRITON_INTERPRET=1 before triton is imported; they run in a
# subprocess started by test_interpreter.py, never in this process.
collect_ignore = [] if os.environ.get("TRITON_INTERPRET") == "1" else ["interpreted"]
