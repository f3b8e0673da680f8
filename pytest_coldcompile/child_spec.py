"""What the pytest process tells a cold child about the one test it runs: a JSON object that
crosses the process boundary (in a fork server's request, or a spawned child's file), typed
here in one place. Features add entries under keys of their own through the
``pytest_coldcompile_child_spec`` hook (this plugin's are typed below).
"""

from __future__ import annotations

from typing import Any, TypedDict


class ChildSpec(TypedDict, total=False):
    """The engine's entries are always there (``ColdEngine.child_spec``); the features' only
    where their feature is on."""

    dir: str  # the child's private directory: caches, records, output
    nodeid: str
    fingerprint: dict[str, Any]  # what a re-collecting child compares with the item it finds
    parent_pid: int  # the child dies with it
    mode: str  # fork, zygote or spawn
    mode_reason: str
    junit_family: str | None  # the parent writes JUnit XML in this family (None: it writes none)
    workerinput: dict[str, Any] | None  # xdist's worker facts, for a re-collecting child
    smem_limit: int | None
    smem_source: str
    smem_device: str | None
    emulate_device: str | None
    cuda_visible_devices: str | None  # an xdist worker's GPU
    gpu_position: int | None
    warm_compile_stack: bool  # a child forked ahead imports torch's compile stack while it waits
    cuda_ahead: bool  # a child forked ahead creates its CUDA context while it waits
    before: list[str]  # earlier tests to run first, in the same child (the masker finder)
    before_fingerprints: list[dict[str, Any]]
    # The features' entries.
    debug_handoff: dict[str, bool] | None  # --pdb / --trace: the child takes the terminal
    prove: dict[str, Any]  # a proof's bug-active run: {"leg": "cold" | "warm"}
    warm_check: bool  # the warm-cache check's rerun
    find_masker: bool  # the masker finder's children record what they observe

