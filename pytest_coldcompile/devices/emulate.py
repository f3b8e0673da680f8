"""Device emulation: every Triton kernel a cold child loads (or launches in the interpreter) is
also compiled for the emulated device's architecture and refused, with Triton's own
OutOfResources, where that compile is over the device's limits. Imports no triton until used.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

from pytest_coldcompile.devices.named import NamedDevice
from pytest_coldcompile.devices.smem_cap import STATIC_LAUNCHER_MODULES, PatchSet, SmemCap

# Blackwell's tensor memory per block, in columns: the figure Triton checks on load
# (triton/compiler/compiler.py, CompiledKernel._init_handles).
TENSOR_MEMORY_COLUMNS = 512


@dataclass(frozen=True)
class Footprint:
    """What one compile of a kernel needs per block."""

    arch: int
    shared: int
    threads: int
    registers: int | None = None
    tensor_memory: int | None = None


@dataclass
class Judgement:
    """One kernel judged for the emulated device: its footprint there and the verdict."""

    kernel: str
    there: Footprint
    limit: int
    outcome: str  # "fits" | "out_of_resources"
    resource: str | None = None  # what ran out
    required: int | None = None
    available: int | None = None
    here: Footprint | None = None  # the real GPU's own compile, once it loaded

    def error(self) -> Exception:
        from triton.runtime.errors import OutOfResources

        exc = OutOfResources(self.required, self.available, self.resource)
        exc.add_note(f"pytest-coldcompile: {self.kernel} compiled for sm_{self.there.arch}, the "
                     "emulated device's architecture")
        return exc

    def record(self) -> dict[str, Any]:
        out = asdict(self)
        out["differs"] = self.here is not None and (
            self.here.shared != self.there.shared or self.here.registers != self.there.registers)
        return out


class Emulation(PatchSet):
    """One installed emulated device; remove() undoes every patch."""

    def __init__(self, device: NamedDevice, smem_limit: int | None = None,
                 scratch: str | None = None) -> None:
        super().__init__()
        self.device = device
        self.limit = min(device.shared_per_block, smem_limit or device.shared_per_block)
        self.scratch = scratch  # where ptxas's temporary files go (the child's cache)
        self.cap = SmemCap(self.limit, judge_loads=False)
        self.compiles = 0  # target compiles this child ran
        self._judged: dict[str, Judgement] = {}  # by the kernel's own cache key
        self._lock = threading.RLock()
        self._launches: Any = None

    # -- the core: compile for the target, judge ---------------------------------------------
    def judge(self, key: str, name: str, src: Any, options: dict[str, Any]) -> Judgement:
        """The verdict on src compiled for the device with options; compiled once per key."""
        from pytest_coldcompile.devices import target_compile

        with self._lock:
            judged = self._judged.get(key)
            if judged is not None:
                return judged
            device = self.device
            target = target_compile.gpu_target(device.arch, device.warp_size)
            compiled = target_compile.compile_for(src, options, target, self.scratch)
            self.compiles += 1
            meta = compiled.metadata
            there = Footprint(
                arch=device.arch,
                shared=int(meta.shared or 0),
                threads=int(meta.num_warps) * device.warp_size,
                registers=target_compile.registers(compiled.kernel),
                tensor_memory=getattr(meta, "tmem_size", None),
            )
            judged = self._verdict(name, there)
            self._judged[key] = judged
            return judged

    def _verdict(self, name: str, there: Footprint) -> Judgement:
        # In the order the device's own load checks them (CompiledKernel._init_handles).
        if there.shared > self.limit:
            return Judgement(name, there, self.limit, "out_of_resources", "shared memory",
                             there.shared, self.limit)
        if there.tensor_memory is not None and there.tensor_memory > TENSOR_MEMORY_COLUMNS:
            return Judgement(name, there, self.limit, "out_of_resources", "tensor memory",
                             there.tensor_memory, TENSOR_MEMORY_COLUMNS)
        if there.registers is not None:
            most = self.device.max_threads_for(there.registers)
            if there.threads > most:
                return Judgement(name, there, self.limit, "out_of_resources", "threads",
                                 there.threads, most)
        return Judgement(name, there, self.limit, "fits")

    def check_compiled(self, kernel: Any) -> Judgement | None:
        """Judge a kernel the real GPU compiled (a CompiledKernel); raise if over the limit."""
        from triton.compiler.compiler import ASTSource

        from pytest_coldcompile.devices import target_compile

        meta = kernel.metadata
        key = f"{kernel.hash}-sm_{self.device.arch}"
        if meta.target.arch == self.device.arch:
            # The real GPU's own compile is the device's: judged by the device's limits.
            with self._lock:
                judged = self._judged.get(key) or self._verdict(kernel.name, Footprint(
                    arch=meta.target.arch, shared=int(meta.shared or 0),
                    threads=int(meta.num_warps) * self.device.warp_size,
                    tensor_memory=getattr(meta, "tmem_size", None)))
                self._judged[key] = judged
        elif not isinstance(getattr(kernel, "src", None), ASTSource):
            return None  # compiled from IR text: no source to compile for another target
        else:
            options = target_compile.chosen_options(meta)
            judged = self.judge(key, kernel.name, kernel.src, options)
        if judged.outcome != "fits":
            raise judged.error()
        return judged

    def check_launch(self, interpreted: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> Judgement:
        """Judge an interpreted launch from its own arguments; raise if over the limit."""
        from pytest_coldcompile.devices import target_compile

        with self._lock:
            if self._launches is None:
                target = target_compile.gpu_target(self.device.arch, self.device.warp_size)
                self._launches = target_compile.LaunchCompiler(target)
            key, src, options = self._launches.source(interpreted, args, kwargs)
        judged = self.judge(f"{key}-sm_{self.device.arch}", src.name, src, options)
        if judged.outcome != "fits":
            raise judged.error()
        return judged

    def summary(self) -> dict[str, Any]:
        d = self.device
        return {
            "device": d.name,
            "arch": d.arch,
            "smem_limit": self.limit,
            "target_compiles": self.compiles,
            "kernels": [j.record() for j in self._judged.values()],
        }

    # -- install / remove --------------------------------------------------------------------
    def install(self) -> Emulation:
        from pytest_coldcompile.devices import target_compile

        reason = target_compile.unsupported(self.device.arch)
        if reason is not None:
            raise target_compile.UnsupportedTarget(
                f"cannot emulate {self.device.name} ({self.device.sm}): {reason}")
        self.cap.install()
        self._undo.append(self.cap.remove)
        self._undo.append(target_compile.see_interpreted_as_jit())
        self._undo.append(target_compile.track_language_patches())
        self._on_import("triton.compiler.compiler", self._patch_compiled_kernel)
        self._on_import("triton.runtime.interpreter", self._patch_interpreter)
        for name in STATIC_LAUNCHER_MODULES:
            self._on_import(name, self._patch_static_launcher)
        return self

    def _replace(self, owner: Any, name: str, value: Any) -> None:
        original = owner.__dict__[name]
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, original))

    # -- the patches -------------------------------------------------------------------------
    def _patch_compiled_kernel(self, mod: ModuleType) -> None:
        cls = getattr(mod, "CompiledKernel", None)
        if cls is None or "_init_handles" not in cls.__dict__:
            return
        original = cls.__dict__["_init_handles"]
        emulation = self

        # Judged before Triton's own checks, which would make the kernel object raise on
        # every later launch; the real GPU then loads its own compile, judged by its own limit.
        def _init_handles(kernel: Any) -> Any:
            if getattr(kernel, "module", None) is not None:
                return original(kernel)
            judged = emulation.check_compiled(kernel)
            with emulation.cap.uncapped():
                result = original(kernel)
            if judged is not None and judged.here is None:
                judged.here = Footprint(
                    arch=kernel.metadata.target.arch,
                    shared=int(kernel.metadata.shared or 0),
                    threads=int(kernel.metadata.num_warps) * kernel.metadata.target.warp_size,
                    registers=getattr(kernel, "n_regs", None),
                )
            return result

        self._replace(cls, "_init_handles", functools.update_wrapper(_init_handles, original))

    def _patch_interpreter(self, mod: ModuleType) -> None:
        cls = getattr(mod, "InterpretedFunction", None)
        if cls is None or "run" not in cls.__dict__:
            return
        original = cls.__dict__["run"]
        emulation = self

        # A launch is judged before it runs, as the device refuses it before it runs.
        def run(fn: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
            if not warmup:
                emulation.check_launch(fn, args, kwargs)
            return original(fn, *args, grid=grid, warmup=warmup, **kwargs)

        self._replace(cls, "run", functools.update_wrapper(run, original))

    def _patch_static_launcher(self, mod: ModuleType) -> None:
        # Inductor's static launcher loads a CompiledKernel's cubin itself: judge the kernel
        # when the launcher is made from it, refuse when it loads.
        verdicts: dict[str, Judgement | None] = {}
        for cls in [c for c in vars(mod).values() if isinstance(c, type)
                    and c.__module__ == mod.__name__ and "load_kernel" in c.__dict__
                    and "__init__" in c.__dict__]:
            init, load = cls.__dict__["__init__"], cls.__dict__["load_kernel"]

            def __init__(launcher: Any, kernel: Any, *args: Any, _init: Any = init,
                         **kwargs: Any) -> None:
                _init(launcher, kernel, *args, **kwargs)
                try:
                    verdicts[str(getattr(kernel, "hash", ""))] = self.check_compiled(kernel)
                except Exception as exc:  # refused: raised when it loads, as Triton would
                    verdicts[str(getattr(kernel, "hash", ""))] = exc  # type: ignore[assignment]

            def load_kernel(launcher: Any, device: int, _load: Any = load) -> None:
                verdict = verdicts.get(str(getattr(launcher, "hash", "")))
                if isinstance(verdict, Exception):
                    raise verdict
                return _load(launcher, device)

            self._replace(cls, "__init__", functools.update_wrapper(__init__, init))
            self._replace(cls, "load_kernel", functools.update_wrapper(load_kernel, load))


def install(device: NamedDevice, smem_limit: int | None = None,
            scratch: str | None = None) -> Emulation:
    """Emulate device from now on (its limit lowered to smem_limit if given); returns the
    emulation for remove() and its summary()."""
    return Emulation(device, smem_limit, scratch).install()
