"""The fx front end's analytic shape rules, one module per operator family; importing this package
registers them all in the dispatch tables of `registry`."""

from . import activation, attention, elementwise, linear, pool, shape  # noqa: F401 - each registers its rules
