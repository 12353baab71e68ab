"""Shared by the tests of the compiled extension (pipefisher._core).

Importing this module skips the importing test module when the extension is
not built (a source-tree run), unless PF_TEST_INSTALLED=1 says the installed
package is under test: then a missing extension is an error.
"""

import os

import pytest

try:
    import pipefisher.compiler  # noqa: F401  (loads pipefisher._core as users do)
except ImportError as err:
    if os.environ.get("PF_TEST_INSTALLED") == "1":
        raise
    pytest.skip(f"pipefisher._core is not built ({err}); pip install . to test the bindings",
                allow_module_level=True)
