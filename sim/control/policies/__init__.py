"""Built-in policies; importing this package registers every one of them."""

from . import static  # noqa: F401
