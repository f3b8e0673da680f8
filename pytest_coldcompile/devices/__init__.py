"""Devices: CUDA facts learned without initializing CUDA (``cuda``), the device markers
(``markers``) and the shared-memory cap that emulates a smaller GPU (``smem_cap``)."""
