"""Shared policy code: controllers, registry, estimators, collective selection.

Pure Python + numpy/scipy. Never imports simpy, torch or pandas, so real runs use it unchanged.
"""

from .registry import PolicyInfo, make_policy, policy_info, policy_names, register_policy
from .types import COLLECTIVES, Controller, Decision, Observation

__all__ = [
    "COLLECTIVES",
    "Controller",
    "Decision",
    "Observation",
    "PolicyInfo",
    "make_policy",
    "policy_info",
    "policy_names",
    "register_policy",
]
