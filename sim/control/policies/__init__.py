"""Built-in policies; importing this package registers every one of them."""

from . import (  # noqa: F401
    accordion,
    bandit,
    budget,
    delay_aware,
    gravac,
    moo,
    mpc,
    oracle,
    static,
)
