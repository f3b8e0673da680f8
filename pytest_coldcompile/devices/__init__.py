"""Devices: CUDA facts learned without initializing CUDA (``cuda``), the device markers
(``markers``), the named devices (``named``), the shared-memory cap that emulates a smaller GPU
(``smem_cap``) and the emulation of a named device's architecture (``emulate``, compiling
through ``target_compile``)."""
