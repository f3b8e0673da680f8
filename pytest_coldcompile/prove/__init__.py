"""--cold-compile-prove: prove that a regression test marked guards(bug, raises=...) fails
for the right reason when its bug is brought back, in a fresh cold child (docs/prove.md)."""

from pytest_coldcompile.prove.summary import VERDICT_ORDER as VERDICTS

__all__ = ["VERDICTS"]
