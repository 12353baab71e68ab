"""Which pipefisher the suite tests.

By default ``python/`` goes first on sys.path, so that ``import pipefisher``
works from the source tree without installing it; the tests of the compiled
extension (pipefisher._core) are then skipped when it is not built.

``PF_TEST_INSTALLED=1`` (scripts/test.sh, in the virtual environment it
installs the package into) tests the installed package instead: the source
tree stays off sys.path, the package must not come from it, and the
extension's tests must run.

``PF_SOURCE_DIR`` tells the tests and ``pipefisher.tools`` where the
checkout is (examples, headers, test inputs); set here from this file.
"""

import os
import sys
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]
os.environ.setdefault("PF_SOURCE_DIR", str(PYTHON_DIR.parent))
INSTALLED = os.environ.get("PF_TEST_INSTALLED") == "1"

if not INSTALLED:
    if str(PYTHON_DIR) not in sys.path:
        sys.path.insert(0, str(PYTHON_DIR))
else:
    import pipefisher

    package_dir = Path(pipefisher.__file__).resolve().parent
    if PYTHON_DIR in package_dir.parents:
        raise RuntimeError(f"PF_TEST_INSTALLED=1 but pipefisher comes from the source tree "
                           f"({package_dir}); run from the installed environment without "
                           f"PYTHONPATH")
