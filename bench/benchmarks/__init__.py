"""One module per benchmark; every module here is imported by ``bench.registry.discover``."""
