"""gridpair's tests. This conftest puts tests/gridpair on sys.path (pytest's prepend import
mode), so that the tests below it import the shared helpers ``numerics`` and
``interpreted_kernels``."""
