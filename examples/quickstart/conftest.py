from toykernels import SELECTOR

import pytest_coldcompile

# An installed package would declare it instead, in its pyproject.toml:
#   [project.entry-points."pytest_coldcompile.selectors"]
#   toykernels = "toykernels:SELECTOR"
pytest_coldcompile.register_selector(SELECTOR)
