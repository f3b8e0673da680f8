"""--cold-compile-prove: prove that a regression test marked guards(bug, raises=...) fails
for the right reason when its bug is brought back, in a fresh cold child (docs/prove.md)."""
