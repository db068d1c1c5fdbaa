"""The kernel bookkeeping the CLI shows (``convexsim warmup``, the first-run notice): re-exported from its home
``convexsim._kernel_clock``, beside the kernel decorator, where the core's run loop reads it."""

from __future__ import annotations

from convexsim._kernel_clock import COMPILE_SECONDS_PER_KERNEL, KernelClock, kernel_modules, uncached_kernels

__all__ = ["KernelClock", "uncached_kernels", "COMPILE_SECONDS_PER_KERNEL", "kernel_modules"]
