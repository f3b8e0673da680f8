"""Registers the toy library's selector, so that cold children reset it and report on it."""
from toytiles import SELECTOR

import pytest_coldcompile

pytest_coldcompile.register_selector(SELECTOR)
