"""Executors schedule RunSpecs on workers and report what happened to each. They never touch the store."""

from .base import Job, Outcome, plan_devices, usable_cores

__all__ = ["Job", "Outcome", "plan_devices", "usable_cores"]
