"""gpudiag test suite (a package, so helpers import as ``from .conftest import …``)."""
